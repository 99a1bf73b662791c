package bolt

import (
	"runtime"
	"sync"
)

// tableGrower grows the engine's task table off the engine's lock: when
// the table asks (table.wantGrow), it allocates the larger array without
// the lock (pre-faulting hundreds of MiB takes a while), then moves the
// keys one step at a time, taking the lock for each step only. So no
// engine operation waits for more than a step (see migrateStep), where a
// growth made at once would stall them all, most of a second at ten
// million tasks.
type tableGrower struct {
	e    *Engine
	kick chan struct{}
	quit chan struct{}
	wg   sync.WaitGroup
}

func (g *tableGrower) init(e *Engine) {
	g.e = e
	g.kick = make(chan struct{}, 1)
	g.quit = make(chan struct{})
}

func (g *tableGrower) start() {
	g.wg.Add(1)
	go g.loop()
}

// stop ends the goroutine, leaving a growth under way as it is (the
// table's free releases both arrays).
func (g *tableGrower) stop() {
	close(g.quit)
	g.wg.Wait()
}

// request is the table's wantGrow: it runs under Engine.mu, so it only
// signals.
func (g *tableGrower) request() {
	select {
	case g.kick <- struct{}{}:
	default:
	}
}

func (g *tableGrower) loop() {
	defer g.wg.Done()
	for {
		select {
		case <-g.kick:
			g.grow()
		case <-g.quit:
			return
		}
	}
}

// grow makes the growth the table asked for, if it still wants it (it may
// have grown at once meanwhile, or been rebuilt by a reload).
func (g *tableGrower) grow() {
	e := g.e
	e.mu.Lock()
	t := e.tasks
	size := t.growSize()
	e.mu.Unlock()
	if size == 0 {
		return
	}
	slots, release := allocOffHeap[slot](size)
	e.mu.Lock()
	started := e.tasks == t && t.startGrow(slots, release)
	e.mu.Unlock()
	if !started {
		release()
		return
	}
	for {
		select {
		case <-g.quit:
			return
		default:
		}
		e.mu.Lock()
		done := e.tasks != t || t.migrate(migrateStep)
		e.mu.Unlock()
		if done {
			return
		}
		runtime.Gosched() // let the callers waiting for the lock in first
	}
}

// newTasksTable makes the live-task table, sized for hint tasks, grown by
// the engine's grower.
func (e *Engine) newTasksTable(hint int) *table {
	t := newTable(hint)
	t.wantGrow = e.grower.request
	return t
}
