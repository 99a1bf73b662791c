package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// FuzzSessionFrames drives a real session with a fuzzed program of worker
// frames: Results, BatchResults, Heartbeats, Progress and Credit for the
// tasks it was sent (with right, missing and wrong attempt ids, known and
// unknown outcomes), and raw frames decoded from the input. Whatever the
// program, the server must not panic, must never have sent more deliveries
// than the concurrency plus the answers it got (no slot is freed twice, or
// without an answer), must release every task when the session ends, and
// must keep every task accounted for in exactly one state.
//
//	go test ./server -run '^$' -fuzz FuzzSessionFrames -fuzztime 30s
func FuzzSessionFrames(f *testing.F) {
	// The fuzz target may not log through f, so the server logs nowhere.
	s := servertest.Start(f, server.Config{ReclaimWindow: time.Hour, Logger: slog.New(slog.DiscardHandler)})
	tasks := conveyorv1connect.NewTaskServiceClient(servertest.HTTPClient(), s.URL(), connect.WithGRPC())
	admin := conveyorv1connect.NewAdminServiceClient(servertest.HTTPClient(), s.URL(), connect.WithGRPC())
	var runs atomic.Int64

	f.Add([]byte{6, 6, 0, 0, 1, 0, 0, 6, 4, 2, 0, 1})
	f.Add([]byte{6, 1, 3, 1, 2, 0, 50, 6, 0, 0, 3, 1, 6, 0, 0, 4, 0})
	f.Add([]byte{6, 6, 6, 4, 3, 0, 1, 1, 1, 2, 2, 7, 0, 0})
	f.Add([]byte{6, 3, 200, 6})
	f.Add([]byte{6, 5, 4, 0x0a, 0x02, 0x10, 0x01})
	f.Fuzz(func(t *testing.T, program []byte) {
		queue := fmt.Sprintf("fuzz%d", runs.Add(1))
		const nTasks = 6
		for range nTasks {
			if _, err := tasks.Enqueue(context.Background(), connect.NewRequest(&conveyorv1.EnqueueRequest{Queue: queue, Type: "t"})); err != nil {
				t.Fatal(err)
			}
		}
		concurrency := int32(1)
		if len(program) > 0 {
			concurrency = int32(program[0]%3) + 1
		}
		fw := startFuzzWorker(t, s, queue, concurrency)
		fw.run(program)
		if w, err := admin.ListWorkers(context.Background(), connect.NewRequest(&conveyorv1.ListWorkersRequest{})); err == nil {
			for _, info := range w.Msg.GetWorkers() {
				if info.GetInFlight() > info.GetConcurrency() {
					t.Fatalf("session %s holds %d deliveries with concurrency %d", info.GetSessionId(), info.GetInFlight(), info.GetConcurrency())
				}
			}
		}
		dispatched := fw.close()
		if limit := int(concurrency) + fw.answers; dispatched > limit {
			t.Fatalf("received %d deliveries with concurrency %d and %d answers sent", dispatched, concurrency, fw.answers)
		}
		res, err := admin.ListQueues(context.Background(), connect.NewRequest(&conveyorv1.ListQueuesRequest{}))
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range res.Msg.GetQueues() {
			if q.GetName() != queue {
				continue
			}
			if q.GetActive() != 0 {
				t.Fatalf("%d tasks still ACTIVE after the session ended", q.GetActive())
			}
			sum := q.GetScheduled() + q.GetPending() + q.GetRetry() + q.GetCompleted() + q.GetArchived() + q.GetCanceled()
			if sum != nTasks {
				t.Fatalf("queue counts add up to %d, want %d: %v", sum, nTasks, q)
			}
		}
	})
}

// fuzzWorker is a raw worker that runs a fuzzed program of frames.
type fuzzWorker struct {
	t      *testing.T
	stream *connect.BidiStreamForClient[conveyorv1.WorkerMessage, conveyorv1.ServerMessage]
	cancel context.CancelFunc

	mu         sync.Mutex
	deliveries []*conveyorv1.TaskEnvelope // every envelope received, in order
	nDelivered int                        // Dispatch and BatchDispatch frames received
	arrived    chan struct{}
	ended      chan struct{}

	answers int  // Results sent (each may free at most one slot)
	dead    bool // the stream is known to have ended
}

func startFuzzWorker(t *testing.T, s *servertest.Server, queue string, concurrency int32) *fuzzWorker {
	client := conveyorv1connect.NewWorkerServiceClient(servertest.HTTPClient(), s.URL(), connect.WithGRPC())
	ctx, cancel := context.WithCancel(context.Background())
	fw := &fuzzWorker{t: t, stream: client.Session(ctx), cancel: cancel,
		arrived: make(chan struct{}, 64), ended: make(chan struct{})}
	if err := fw.stream.Send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Hello{Hello: &conveyorv1.Hello{
		Queues: map[string]int32{queue: 1}, Concurrency: concurrency, BatchTypes: []string{"t"}}}}); err != nil {
		t.Fatal(err)
	}
	go fw.read()
	return fw
}

func (fw *fuzzWorker) read() {
	defer close(fw.ended)
	for {
		m, err := fw.stream.Receive()
		if err != nil {
			return
		}
		fw.mu.Lock()
		switch f := m.GetFrame().(type) {
		case *conveyorv1.ServerMessage_Dispatch:
			fw.deliveries = append(fw.deliveries, f.Dispatch.GetTask())
			fw.nDelivered++
		case *conveyorv1.ServerMessage_BatchDispatch:
			fw.deliveries = append(fw.deliveries, f.BatchDispatch.GetTasks()...)
			fw.nDelivered++
		}
		fw.mu.Unlock()
		select {
		case fw.arrived <- struct{}{}:
		default:
		}
	}
}

// pick returns the envelope the byte b selects, or nil before any arrived.
func (fw *fuzzWorker) pick(b byte) *conveyorv1.TaskEnvelope {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	if len(fw.deliveries) == 0 {
		return nil
	}
	return fw.deliveries[int(b)%len(fw.deliveries)]
}

func (fw *fuzzWorker) send(m *conveyorv1.WorkerMessage) {
	if fw.dead {
		return
	}
	if err := fw.stream.Send(m); err != nil {
		fw.dead = true // a frame the server refused ended the stream
	}
}

// attempt returns the attempt id to send for env: its own, none, or a
// wrong one, as mode says.
func attempt(env *conveyorv1.TaskEnvelope, mode byte) string {
	switch mode % 3 {
	case 0:
		return env.GetAttemptId()
	case 1:
		return ""
	}
	return "bogus-" + env.GetAttemptId()
}

func (fw *fuzzWorker) result(env *conveyorv1.TaskEnvelope, outcome, mode, size byte) *conveyorv1.Result {
	r := &conveyorv1.Result{TaskId: env.GetId(), Outcome: conveyorv1.TaskOutcome(outcome % 6),
		AttemptId: attempt(env, mode), ErrorMsg: "fuzz"}
	if size == 255 {
		r.Result = make([]byte, server.MaxResultBytes+1)
	} else {
		r.Result = make([]byte, size)
	}
	return r
}

// run interprets program: each step is an opcode byte and its operands.
func (fw *fuzzWorker) run(program []byte) {
	arg := func(i int) byte {
		if i < len(program) {
			return program[i]
		}
		return 0
	}
	for pc := 1; pc < len(program) && !fw.dead; {
		op := program[pc] % 8
		pc++
		switch op {
		case 0: // Result: target, outcome, attempt mode
			if env := fw.pick(arg(pc)); env != nil {
				fw.send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Result{Result: fw.result(env, arg(pc+1), arg(pc+2), arg(pc+3)%8)}})
				fw.answers++
			}
			pc += 3
		case 1: // Heartbeat: count, attempt mode
			hb := &conveyorv1.Heartbeat{}
			for i := range int(arg(pc) % 8) {
				if env := fw.pick(byte(i) + arg(pc+1)); env != nil {
					hb.ActiveTaskIds = append(hb.ActiveTaskIds, env.GetId(), env.GetId())
					if a := attempt(env, arg(pc+1)); a != "" {
						hb.ActiveAttemptIds = append(hb.ActiveAttemptIds, a)
					}
				}
			}
			fw.send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Heartbeat{Heartbeat: hb}})
			pc += 2
		case 2: // Progress: target, percent
			if env := fw.pick(arg(pc)); env != nil {
				fw.send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Progress{Progress: &conveyorv1.Progress{
					TaskId: env.GetId(), Percent: int32(int8(arg(pc + 1))), Message: "p"}}})
			}
			pc += 2
		case 3: // Credit: n (invalid values end the stream)
			fw.send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Credit{Credit: &conveyorv1.Credit{N: int32(int8(arg(pc)))}}})
			pc++
		case 4: // BatchResult: count, outcome, attempt mode
			br := &conveyorv1.BatchResult{}
			for i := range int(arg(pc) % 4) {
				if env := fw.pick(byte(i) + arg(pc+1)); env != nil {
					br.Results = append(br.Results, fw.result(env, arg(pc+1), arg(pc+2), 0))
				}
			}
			fw.send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_BatchResult{BatchResult: br}})
			fw.answers += len(br.Results)
			pc += 3
		case 5: // a raw frame: length, bytes
			n := int(arg(pc))
			raw := program[min(pc+1, len(program)):min(pc+1+n, len(program))]
			var m conveyorv1.WorkerMessage
			if proto.Unmarshal(raw, &m) == nil {
				fw.send(&m)
				if m.GetResult() != nil {
					fw.answers++
				}
				fw.answers += len(m.GetBatchResult().GetResults())
			}
			pc += 1 + n
		case 6: // wait briefly for a delivery
			select {
			case <-fw.arrived:
			case <-fw.ended:
				fw.dead = true
			case <-time.After(200 * time.Millisecond):
			}
		case 7: // a Result for a task the session never held
			fw.send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Result{Result: &conveyorv1.Result{
				TaskId: "01J00000000000000000000000", Outcome: conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS}}})
			pc++
		}
	}
}

// close ends the session and returns how many deliveries it received.
func (fw *fuzzWorker) close() int {
	_ = fw.stream.CloseRequest()
	select {
	case <-fw.ended:
	case <-time.After(20 * time.Second):
		fw.t.Fatal("the session did not end after the worker closed its side")
	}
	fw.cancel()
	_, err := fw.stream.Receive()
	if err != nil && !errors.Is(err, io.EOF) && connect.CodeOf(err) != connect.CodeInvalidArgument && connect.CodeOf(err) != connect.CodeCanceled {
		fw.t.Logf("session ended with %v", err)
	}
	fw.mu.Lock()
	defer fw.mu.Unlock()
	return fw.nDelivered
}
