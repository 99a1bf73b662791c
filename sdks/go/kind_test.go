package conveyor_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
	"github.com/conveyor-dev/conveyor/server"
)

// resizeImage is a kind with no default options.
type resizeImage struct {
	URL   string `json:"url"`
	Width int    `json:"width"`
}

func (resizeImage) Kind() string { return "image:resize" }

// sendMail is a kind with default options.
type sendMail struct {
	To string `json:"to"`
}

func (sendMail) Kind() string { return "mail:send" }

func (sendMail) KindOptions() []conveyor.TaskOption {
	return []conveyor.TaskOption{conveyor.Queue("mail"), conveyor.MaxRetry(3), conveyor.Priority(7)}
}

// pointerKind has a pointer receiver, as a payload passed by pointer may.
type pointerKind struct{ N int }

func (*pointerKind) Kind() string { return "pointer:kind" }

func TestKindOf(t *testing.T) {
	eq(t, "KindOf[resizeImage]", conveyor.KindOf[resizeImage](), "image:resize")
	eq(t, "KindOf[*pointerKind]", conveyor.KindOf[*pointerKind](), "pointer:kind")
	defer func() {
		p := recover()
		if p == nil || !strings.Contains(p.(string), "interface type") {
			t.Errorf("KindOf[conveyor.Kind] panicked with %v, want a panic naming an interface type", p)
		}
	}()
	conveyor.KindOf[conveyor.Kind]()
}

func TestEnqueueKind(t *testing.T) {
	t.Parallel()
	e := wtSetup(t, server.Config{})
	c := newClient(t, e.srv.URL())
	ctx := context.Background()

	info, err := conveyor.EnqueueKind(ctx, c, resizeImage{URL: "a.png", Width: 64})
	if err != nil {
		t.Fatalf("EnqueueKind: %v", err)
	}
	eq(t, "type", info.Type, "image:resize")
	eq(t, "queue", info.Queue, "default")
	eq(t, "content type", info.ContentType, "application/json")
	eq(t, "payload", string(info.Payload), `{"url":"a.png","width":64}`)

	// The kind's defaults apply.
	info, err = conveyor.EnqueueKind(ctx, c, sendMail{To: "a@example.com"})
	if err != nil {
		t.Fatalf("EnqueueKind with defaults: %v", err)
	}
	stored := getTask(t, c, info.ID)
	eq(t, "type", stored.Type, "mail:send")
	eq(t, "queue", stored.Queue, "mail")
	eq(t, "max retry", stored.MaxRetry, 3)
	eq(t, "priority", stored.Priority, 7)

	// A call's option overrides a default, and the others stay.
	info, err = conveyor.EnqueueKind(ctx, c, sendMail{To: "b@example.com"}, conveyor.Queue("urgent"))
	if err != nil {
		t.Fatalf("EnqueueKind with an override: %v", err)
	}
	stored = getTask(t, c, info.ID)
	eq(t, "overridden queue", stored.Queue, "urgent")
	eq(t, "kept max retry", stored.MaxRetry, 3)
}

func TestNewKindTask(t *testing.T) {
	task, err := conveyor.NewKindTask(sendMail{To: "x"}, conveyor.MaxRetry(9))
	if err != nil {
		t.Fatalf("NewKindTask: %v", err)
	}
	req := task.Proto()
	eq(t, "type", req.GetType(), "mail:send")
	eq(t, "queue", req.GetQueue(), "mail")
	eq(t, "max retry", req.GetOptions().GetMaxRetry(), int32(9))
	eq(t, "content type", req.GetContentType(), "application/json")

	// A payload encoding/json refuses fails before any call.
	if _, err := conveyor.NewKindTask(unencodable{}); err == nil || !strings.Contains(err.Error(), "bad:kind") {
		t.Errorf("NewKindTask(unencodable) = %v, want an error naming the type", err)
	}
}

type unencodable struct{ C chan int }

func (unencodable) Kind() string { return "bad:kind" }

func TestHandleKind(t *testing.T) {
	t.Parallel()
	e := wtSetup(t, server.Config{})
	c := newClient(t, e.srv.URL())
	ctx := context.Background()

	got := make(chan resizeImage, 1)
	gotPtr := make(chan int, 1)
	w := e.newWorker()
	conveyor.HandleKind(w, func(_ context.Context, d *conveyor.Delivery, v resizeImage) error {
		if d.Type != "image:resize" {
			t.Errorf("delivery type %q, want image:resize", d.Type)
		}
		got <- v
		return nil
	})
	conveyor.HandleKind(w, func(_ context.Context, _ *conveyor.Delivery, v *pointerKind) error {
		gotPtr <- v.N
		return nil
	})
	wtRun(t, w)

	ok, err := conveyor.EnqueueKind(ctx, c, resizeImage{URL: "b.png", Width: 32})
	if err != nil {
		t.Fatalf("EnqueueKind: %v", err)
	}
	eq(t, "decoded payload", wtRecv(t, got, 10*time.Second, "the typed payload"), resizeImage{URL: "b.png", Width: 32})
	e.waitState(ok.ID, conveyorv1.TaskState_TASK_STATE_COMPLETED, 10*time.Second)

	if _, err := conveyor.EnqueueKind(ctx, c, &pointerKind{N: 5}); err != nil {
		t.Fatalf("EnqueueKind(pointer): %v", err)
	}
	eq(t, "pointer payload", wtRecv(t, gotPtr, 10*time.Second, "the pointer payload"), 5)

	// A payload that does not decode is archived at once, as HandleJSON's.
	bad, err := c.Enqueue(ctx, "image:resize", []byte(`{"width":"wide"}`))
	if err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	info := e.waitState(bad.ID, conveyorv1.TaskState_TASK_STATE_ARCHIVED, 10*time.Second)
	if info.GetRetried() != 0 || !strings.Contains(info.GetLastError(), "decode the JSON payload") {
		t.Errorf("undecodable payload: retried %d, last error %q; want archived at once with a decode error",
			info.GetRetried(), info.GetLastError())
	}
	select {
	case v := <-got:
		t.Errorf("the handler ran on an undecodable payload, with %+v", v)
	default:
	}
}

func TestKindPayloadIsPlainJSON(t *testing.T) {
	// A kind's task is the one NewJSONTask makes, so that consumers in
	// other languages need nothing of the kind.
	a, err := conveyor.NewKindTask(resizeImage{URL: "u", Width: 1})
	if err != nil {
		t.Fatal(err)
	}
	b, err := conveyor.NewJSONTask("image:resize", resizeImage{URL: "u", Width: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(a.Proto(), b.Proto()) {
		t.Errorf("NewKindTask = %v, want NewJSONTask's %v", a.Proto(), b.Proto())
	}
}
