package sessions

import (
	"context"
	"log/slog"
	"testing"
	"time"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/scheduler"
)

// TestReadyWorkWakesOnlySessionsWithRoom: TasksReady wakes the sessions
// serving the queue that have a free slot. A session whose slots are all
// taken could lease nothing, and wakes itself when one frees: waking it
// would only make it read the ready counts of every queue it serves under
// the broker's lock, for each of the queue's sessions, on every task that
// makes a queue ready (100 busy sessions of 1,000 queues: 100,000 counts
// read for nothing).
func TestReadyWorkWakesOnlySessionsWithRoom(t *testing.T) {
	h := NewHub(nil, Config{}, scheduler.Retrier{}, nil, slog.New(slog.DiscardHandler), time.Now)
	hello := &conveyorv1.Hello{Queues: map[string]int32{"q": 1}, Concurrency: 1}
	full := newSession(context.Background(), h, "full", hello, DefaultMaxSessionConcurrency)
	room := newSession(context.Background(), h, "room", hello, DefaultMaxSessionConcurrency)
	t.Cleanup(func() { full.cancel(nil); room.cancel(nil) })
	deliver(full.flight, "t", "t-1", 1)
	if !h.register(full) || !h.register(room) {
		t.Fatal("register refused a session")
	}
	h.TasksReady("q")
	if len(room.wakeCh) != 1 {
		t.Error("the session with a free slot was not woken")
	}
	if len(full.wakeCh) != 0 {
		t.Error("the session with every slot taken was woken")
	}
}
