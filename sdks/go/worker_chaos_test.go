package conveyor_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// wtProxy is a TCP proxy to a server whose connections the test can sever,
// cutting the streams that run through them.
type wtProxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup
	mu     sync.Mutex
	pairs  map[*wtPair]struct{}
}

type wtPair struct{ a, b net.Conn }

func (p *wtPair) close() {
	_ = p.a.Close()
	_ = p.b.Close()
}

func wtStartProxy(t *testing.T, target string) *wtProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &wtProxy{ln: ln, target: target, pairs: map[*wtPair]struct{}{}}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				p.serve(c)
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		p.mu.Lock()
		for pair := range p.pairs {
			pair.close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *wtProxy) URL() string { return "http://" + p.ln.Addr().String() }

func (p *wtProxy) serve(c net.Conn) {
	u, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	pair := &wtPair{a: c, b: u}
	p.mu.Lock()
	p.pairs[pair] = struct{}{}
	p.mu.Unlock()
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(u, c)
		pair.close()
		close(done)
	}()
	_, _ = io.Copy(c, u)
	pair.close()
	<-done
	p.mu.Lock()
	delete(p.pairs, pair)
	p.mu.Unlock()
}

// cutOne severs one live connection, if any.
func (p *wtProxy) cutOne(rng *rand.Rand) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.pairs) == 0 {
		return false
	}
	k := rng.IntN(len(p.pairs))
	for pair := range p.pairs {
		if k == 0 {
			pair.close()
			delete(p.pairs, pair)
			return true
		}
		k--
	}
	return false
}

// TestWorkerChaos runs 500 tasks through workers that are killed without
// a drain, stopped with a zero drain grace, restarted, and whose streams
// are cut at random. Every task must complete: none is lost.
func TestWorkerChaos(t *testing.T) {
	t.Parallel()
	e := wtSetup(t, server.Config{})
	proxy := wtStartProxy(t, e.srv.Addr().String())
	const n = 500
	reqs := make([]*conveyorv1.EnqueueRequest, n)
	for i := range reqs {
		reqs[i] = wtReq("chaos", "c", fmt.Sprintf(`{"i":%d}`, i), nil)
	}
	ids := e.enqueueAll(reqs)

	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var runs atomic.Int64
	var mu sync.Mutex
	var workers []*conveyor.Worker
	start := func(graceful bool) {
		opts := []conveyor.WorkerOption{conveyor.WithQueue("chaos", 1), conveyor.WithConcurrency(4)}
		if graceful {
			opts = append(opts, conveyor.WithDrainGrace(0))
		}
		w := wtNewWorker(t, proxy.URL(), opts...)
		w.HandleFunc("c", func(ctx context.Context, d *conveyor.Delivery) error {
			runs.Add(1)
			select {
			case <-time.After(time.Duration(10+int(d.ID[len(d.ID)-1])%20) * time.Millisecond): // simulated work
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		wtRun(t, w)
		mu.Lock()
		workers = append(workers, w)
		mu.Unlock()
	}
	stopOne := func() {
		mu.Lock()
		if len(workers) == 0 {
			mu.Unlock()
			return
		}
		k := rng.IntN(len(workers))
		w := workers[k]
		workers = append(workers[:k], workers[k+1:]...)
		mu.Unlock()
		if rng.IntN(2) == 0 {
			_ = w.Close() // abrupt: no drain, no results
		} else {
			_ = w.Shutdown(context.Background()) // drain grace 0 (or the default, abruptly ended)
			_ = w.Close()
		}
	}
	for range 3 {
		start(rng.IntN(2) == 0)
	}
	completed := func() int64 { return e.queue("chaos").GetCompleted() }
	var kills, cuts int
	for i := 0; i < 150 && completed() < n; i++ {
		time.Sleep(time.Duration(10+rng.IntN(30)) * time.Millisecond) // pacing of the chaos, not a wait
		switch rng.IntN(3) {
		case 0:
			stopOne()
			kills++
			start(rng.IntN(2) == 0)
		case 1:
			if proxy.cutOne(rng) {
				cuts++
			}
		case 2:
			mu.Lock()
			few := len(workers) < 4
			mu.Unlock()
			if few {
				start(rng.IntN(2) == 0)
			}
		}
	}
	t.Logf("%d workers stopped, %d connections cut, %d handler runs", kills, cuts, runs.Load())
	servertest.Eventually(t, 60*time.Second, "all tasks completed", func() bool { return completed() == n })
	for _, id := range ids {
		if info := e.get(id); info.GetState() != conveyorv1.TaskState_TASK_STATE_COMPLETED {
			t.Fatalf("task %s is %s", id, info.GetState())
		}
	}
	if runs.Load() < n {
		t.Fatalf("%d handler runs for %d completed tasks", runs.Load(), n)
	}
}
