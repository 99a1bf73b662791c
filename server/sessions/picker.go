package sessions

// picker chooses which of a session's queues the next dispatch comes from,
// by smooth weighted round-robin (the nginx variant): every pick, each queue
// with ready work gains its weight in credit, the richest queue is picked
// and pays the total. Under backlog a 3:1 weighting yields exactly 3:1, the
// picks interleave (A A B A, not A A A B), and a queue with no ready work
// is skipped without banking credit, so it cannot burst when it returns.
// The state carries across calls, so fairness holds over many small plans.
type picker struct {
	weights []int
	current []int
}

func newPicker(weights []int) *picker {
	return &picker{weights: weights, current: make([]int, len(weights))}
}

// next picks the queue of one dispatch among those with ready[i] > 0 and
// returns its index, or -1 when none has any.
func (p *picker) next(ready []int) int {
	total, best := 0, -1
	for i, w := range p.weights {
		if ready[i] <= 0 {
			continue
		}
		p.current[i] += w
		total += w
		if best < 0 || p.current[i] > p.current[best] {
			best = i
		}
	}
	if best >= 0 {
		p.current[best] -= total
	}
	return best
}
