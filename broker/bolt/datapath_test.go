package bolt_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/conveyor-dev/conveyor/broker/bolt"
)

// TestInfoDataPathIsAbsolute: Info names the file by its absolute path
// even when the engine was opened on a relative one (the server's default
// --data-dir is ./conveyor-data): GetBrokerInfo's reader, conveyor info
// on another machine, cannot know the server's working directory.
func TestInfoDataPathIsAbsolute(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	e := openEngine(t, bolt.Config{Path: filepath.Join("data", "conveyor.db")})
	info, err := e.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "data", "conveyor.db"); info.DataPath != want {
		t.Fatalf("Info().DataPath = %q, want %q", info.DataPath, want)
	}
}
