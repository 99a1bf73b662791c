package conveyor_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"connectrpc.com/connect"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// TestWorkerProcessLabels: a Worker tells where it runs (host, pid) unless
// its labels say otherwise; an empty label sends none.
func TestWorkerProcessLabels(t *testing.T) {
	t.Parallel()
	e := wtSetup(t, server.Config{})
	a := e.newWorker(conveyor.WithLabels(map[string]string{"role": "a"}))
	a.HandleFunc("t", func(context.Context, *conveyor.Delivery) error { return nil })
	wtRun(t, a)
	b := e.newWorker(conveyor.WithLabels(map[string]string{"role": "b", conveyor.LabelHost: "", conveyor.LabelPID: "7"}))
	b.HandleFunc("t", func(context.Context, *conveyor.Delivery) error { return nil })
	wtRun(t, b)
	var byRole map[string]map[string]string
	servertest.Eventually(t, 10*time.Second, "both workers listed", func() bool {
		res, err := e.admin.ListWorkers(context.Background(), connect.NewRequest(&conveyorv1.ListWorkersRequest{}))
		if err != nil {
			return false
		}
		byRole = map[string]map[string]string{}
		for _, w := range res.Msg.GetWorkers() {
			byRole[w.GetLabels()["role"]] = w.GetLabels()
		}
		return byRole["a"] != nil && byRole["b"] != nil
	})
	host, _ := os.Hostname()
	if l := byRole["a"]; l[conveyor.LabelHost] != host || l[conveyor.LabelPID] != strconv.Itoa(os.Getpid()) {
		t.Errorf("worker a's labels %v, want host %q and pid %d", l, host, os.Getpid())
	}
	if l := byRole["b"]; l[conveyor.LabelPID] != "7" {
		t.Errorf("worker b's labels %v, want its own pid label", l)
	} else if _, ok := l[conveyor.LabelHost]; ok {
		t.Errorf("worker b's labels %v: an empty host label was sent", l)
	}
}
