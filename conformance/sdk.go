package conformance

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// EnvWorker names the environment variable whose value, a command line
// (split on spaces), is a conformance worker to run the suite against in
// addition to the built-in SDKs. The command must be the worker itself,
// not a launcher such as "go run" that would not pass SIGTERM on.
const EnvWorker = "CONVEYOR_CONFORMANCE_WORKER"

// SDK is one SDK's conformance worker as the suite runs it.
type SDK struct {
	// Name names the SDK in test names.
	Name string
	// Command returns the worker's command line, or an error saying why
	// it cannot run (which fails that SDK's tests: a missing SDK is a
	// failure, not a skip).
	Command func() ([]string, error)
}

// SDKs returns the SDKs under test, given the repository root: the Go
// SDK, the TypeScript SDK, and the worker EnvWorker names, if set.
func SDKs(root string) []SDK {
	sdks := []SDK{
		{Name: "go", Command: func() ([]string, error) { return goWorker(root) }},
		{Name: "ts", Command: func() ([]string, error) { return tsWorker(root) }},
	}
	if v := strings.Fields(os.Getenv(EnvWorker)); len(v) > 0 {
		sdks = append(sdks, SDK{Name: "env", Command: func() ([]string, error) { return v, nil }})
	}
	return sdks
}

var goBuild struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

// goWorker builds the Go conformance worker once per test binary, into a
// temporary directory that CleanupBuilds removes.
func goWorker(root string) ([]string, error) {
	goBuild.once.Do(func() {
		dir, err := os.MkdirTemp("", "conveyor-conformance-")
		if err != nil {
			goBuild.err = fmt.Errorf("build the go worker: %w", err)
			return
		}
		goBuild.dir = dir
		bin := filepath.Join(dir, "worker")
		cmd := exec.Command("go", "build", "-race", "-o", bin, "./sdks/go/conformance/worker")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			goBuild.err = fmt.Errorf("build the go worker: %w\n%s", err, out)
			return
		}
		goBuild.bin = bin
	})
	if goBuild.err != nil {
		return nil, goBuild.err
	}
	return []string{goBuild.bin}, nil
}

// CleanupBuilds removes what goWorker built.
func CleanupBuilds() {
	if goBuild.dir != "" {
		_ = os.RemoveAll(goBuild.dir)
	}
}

// tsWorker is the TypeScript worker's command line; its package must be
// built (sdks/ts/dist).
func tsWorker(root string) ([]string, error) {
	ts := filepath.Join(root, "sdks", "ts")
	if _, err := os.Stat(filepath.Join(ts, "dist")); err != nil {
		return nil, errors.New("the TypeScript SDK is not built (sdks/ts/dist is missing): run make ts")
	}
	worker := filepath.Join(ts, "conformance", "worker.mjs")
	if _, err := os.Stat(worker); err != nil {
		return nil, fmt.Errorf("the TypeScript conformance worker is missing: %w", err)
	}
	return []string{"node", worker}, nil
}
