package sessions

import "github.com/conveyor-dev/conveyor/broker"

// dispatchPlan is the send loop's scratch space, reused across bursts: the
// counts the broker reported, and what one round of a burst picks from
// them.
type dispatchPlan struct {
	picker *picker
	ready  []int // per queue: tasks ready to lease
	groups []int // per queue: fired groups of the session's batch types
	avail  []int // per queue: what the picker may still pick from
	// skip and skipGroups mark the queues whose Lease, or LeaseGroups,
	// came back empty in this burst.
	skip, skipGroups []bool
	// singleN and batchN count, per queue, the tasks and the groups the
	// round picked; picks are the tasks in dispatch order.
	singleN, batchN []int
	picks           []broker.QueuePick
}

func newDispatchPlan(weights []int) *dispatchPlan {
	n := len(weights)
	return &dispatchPlan{picker: newPicker(weights), ready: make([]int, n), groups: make([]int, n), avail: make([]int, n),
		skip: make([]bool, n), skipGroups: make([]bool, n), singleN: make([]int, n), batchN: make([]int, n)}
}

// sendBudget is what a round may send: its free slots, and how many of
// them single tasks and batches may take under the byte bound.
type sendBudget struct{ slots, singles, batches int }

// fill plans a round from ready and groups: the queue of each free slot
// by the picker's weights, where a fired group counts as one dispatch of
// its queue, like a task (protocol §5.2: the weights govern the dispatch
// share across the queues; a batch is one slot). Within a queue a group
// goes first: it has waited to fire already. It reports whether it picked
// anything.
func (p *dispatchPlan) fill(queues []string, b sendBudget) bool {
	for i := range queues {
		if p.skip[i] {
			p.ready[i] = 0
		}
		if p.skipGroups[i] {
			p.groups[i] = 0
		}
	}
	clear(p.singleN)
	clear(p.batchN)
	p.picks = p.picks[:0]
	singles, batches := 0, 0
	for singles+batches < b.slots {
		for i := range p.avail {
			p.avail[i] = 0
			if singles < b.singles {
				p.avail[i] += p.ready[i]
			}
			if batches < b.batches {
				p.avail[i] += p.groups[i]
			}
		}
		qi := p.picker.next(p.avail)
		if qi < 0 {
			break
		}
		if batches < b.batches && p.groups[qi] > 0 {
			p.groups[qi]--
			p.batchN[qi]++
			batches++
			continue
		}
		p.ready[qi]--
		p.singleN[qi]++
		singles++
		p.addPick(queues[qi])
	}
	return singles+batches > 0
}

// singlesPicked is how many tasks the round picked.
func (p *dispatchPlan) singlesPicked() int {
	n := 0
	for _, c := range p.singleN {
		n += c
	}
	return n
}

// addPick appends one task of queue to picks, merging it into the last
// pick when that is of the same queue.
func (p *dispatchPlan) addPick(queue string) {
	if n := len(p.picks); n > 0 && p.picks[n-1].Queue == queue {
		p.picks[n-1].N++
		return
	}
	p.picks = append(p.picks, broker.QueuePick{Queue: queue, N: 1})
}

// singlePicks returns the round's picks of tasks, cut to the first n.
func (p *dispatchPlan) singlePicks(n int) []broker.QueuePick {
	for i := range p.picks {
		if n <= 0 {
			return p.picks[:i]
		}
		p.picks[i].N = min(p.picks[i].N, n)
		n -= p.picks[i].N
	}
	return p.picks
}

// skipPicked marks the queues the round picked from, after it sent
// nothing, so that the next round picks from the others.
func (p *dispatchPlan) skipPicked() {
	for i := range p.singleN {
		if p.singleN[i] > 0 {
			p.skip[i] = true
		}
		if p.batchN[i] > 0 {
			p.skipGroups[i] = true
		}
	}
}
