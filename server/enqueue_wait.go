package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

// This file is how an enqueue waits for room in a queue at its bound
// (max_waiting): once per call, however many of its tasks were refused
// (see roomWaits). The first try is the plain Broker call; only a call a
// full queue refused goes further. Tasks are built anew for each try
// after it, at its time, so that a task enqueued after a wait has the
// time it entered the queue.

// buildFunc builds task j of a call again at now.
type buildFunc func(j int, now time.Time) (broker.NewTask, error)

// anyFull reports whether a full queue refused a task of res: the one
// branch per task an enqueue into queues with room pays.
func anyFull(res []broker.EnqueueResult) bool {
	for _, r := range res {
		if r.Err != nil && errors.Is(r.Err, broker.ErrQueueFull) {
			return true
		}
	}
	return false
}

// waitForRoom gives the tasks of res that full queues refused the call's
// one wait for room: they are tried again, as many at a time as the room
// signalled may hold, until none is refused or the wait ends; their
// outcomes replace their refusals in res. Those still refused then keep
// their refusal, which says how long they waited, and are counted.
func (s *taskService) waitForRoom(ctx context.Context, res []broker.EnqueueResult, build buildFunc) {
	start := s.now()
	s.rooms.await(ctx, roomWait(ctx, start), fullQueues(res), func(room map[string]int64) []string {
		s.retryFull(ctx, res, room, build)
		return fullQueues(res)
	})
	waited := s.now().Sub(start)
	for j, r := range res {
		if q := fullQueue(r.Err); q != "" {
			res[j].Err = waitedFor(r.Err, waited)
			s.metrics.enqueueRejected(q, rejectedFull, 1)
		}
	}
}

// retryFull tries again, in one Enqueue, the tasks of res that full
// queues refused, at most room[q] of queue q, and puts the outcomes in
// res.
func (s *taskService) retryFull(ctx context.Context, res []broker.EnqueueResult, room map[string]int64, build buildFunc) {
	now := s.now()
	var (
		idx   []int
		tasks []broker.NewTask
		taken = map[string]int64{}
	)
	for j, r := range res {
		q := fullQueue(r.Err)
		if q == "" || taken[q] >= room[q] {
			continue
		}
		nt, err := build(j, now)
		if err != nil { // cannot be: the task was valid at the first try
			res[j].Err = err
			continue
		}
		taken[q]++
		idx = append(idx, j)
		tasks = append(tasks, nt)
	}
	if len(tasks) == 0 {
		return
	}
	again, err := s.broker.Enqueue(ctx, broker.EnqueueParams{Tasks: tasks, Now: now})
	for k, j := range idx {
		if again == nil {
			res[j] = broker.EnqueueResult{Err: err}
		} else {
			res[j] = again[k]
		}
	}
}

// waitForTxRoom gives an EnqueueTx of tasks that a full queue refused
// (refusal) its one wait for room: it is tried again, built anew by
// build, whenever the room signalled may hold its tasks of that queue,
// until it is not refused or the wait ends. It returns the last try's
// outcome; a refusal says how long the call waited, and its tasks for
// the full queue are counted.
func (s *taskService) waitForTxRoom(ctx context.Context, tasks []broker.NewTask, refusal error, build buildFunc) ([]*broker.Task, error) {
	var out []*broker.Task
	err, q := refusal, fullQueue(refusal)
	need := map[string]int64{}
	for _, nt := range tasks {
		need[nt.Queue]++
	}
	start := s.now()
	s.rooms.await(ctx, roomWait(ctx, start), []string{q}, func(room map[string]int64) []string {
		if room[q] < need[q] {
			return []string{q} // its tasks cannot all fit yet
		}
		now := s.now()
		again := make([]broker.NewTask, len(tasks))
		for j := range tasks {
			if again[j], err = build(j, now); err != nil {
				q = "" // cannot be: the call was valid at its first try
				return nil
			}
		}
		out, err = s.broker.EnqueueTx(ctx, broker.EnqueueParams{Tasks: again, Now: now})
		if q = fullQueue(err); q != "" {
			return []string{q}
		}
		return nil
	})
	if q != "" {
		s.metrics.enqueueRejected(q, rejectedFull, int(need[q]))
		return nil, waitedFor(err, s.now().Sub(start))
	}
	return out, err
}

// fullQueues lists, once each, the queues whose bound refused a task of
// res.
func fullQueues(res []broker.EnqueueResult) []string {
	var out []string
	for _, r := range res {
		if r.Err == nil {
			continue
		}
		if q := fullQueue(r.Err); q != "" && !slices.Contains(out, q) {
			out = append(out, q)
		}
	}
	return out
}

// fullQueue is the queue whose bound err is the refusal of ("": err is
// not one).
func fullQueue(err error) string {
	var full *broker.QueueFullError
	if err != nil && errors.As(err, &full) {
		return full.Queue
	}
	return ""
}

// waitedFor is a refusal by a full queue after a wait of waited: its
// message says how long the producer waited.
func waitedFor(err error, waited time.Duration) error {
	return fmt.Errorf("%w (waited %s for room)", err, waited.Round(time.Millisecond))
}
