package server

// Bounds on the label values /metrics exports. Without them a producer
// that invents task types, queues or cron ids (or long ones) grows the
// server's memory and every scrape without end: 10,000 types of 1 KiB made
// one scrape 187 MiB. docs/operations.md (Metrics) states what is folded
// into an "_other" series, and the worst case a scrape can reach.
const (
	// maxLabelBytes bounds a queue, type or cron label value: a longer
	// name is counted under otherLabel rather than exported in full.
	maxLabelBytes = 128
	// maxTypeLabels bounds the distinct (queue label, type) pairs the
	// per-type metrics keep; later pairs are counted under type otherLabel
	// of their queue label.
	maxTypeLabels = 2_000
	// maxQueueLabels bounds the distinct queue label values of every
	// per-queue metric; queues past it are counted together under queue
	// otherLabel.
	maxQueueLabels = 500
	// maxCronLabels bounds the distinct cron label values of the cron
	// fire counts; entries past it are counted under cron otherLabel.
	maxCronLabels = 1_000
)

// otherLabel is the value a label takes for the names past a bound. No
// queue can be named so (a queue name starts with a letter or a digit).
const otherLabel = "_other"

// labelCap bounds the distinct values of one label: the first max values
// seen, each at most maxLabelBytes long, keep a series of their own; any
// other value is folded into otherLabel. Its owner serializes its use.
type labelCap struct {
	max  int
	kept map[string]struct{}
}

func newLabelCap(max int) *labelCap { return &labelCap{max: max, kept: map[string]struct{}{}} }

// label is v's label value: v itself when v has, or can take, a series of
// its own, else otherLabel.
func (c *labelCap) label(v string) string {
	if _, ok := c.kept[v]; ok {
		return v
	}
	if len(v) > maxLabelBytes || len(c.kept) >= c.max {
		return otherLabel
	}
	c.kept[v] = struct{}{}
	return v
}

// forget frees v's place, when v had one, and reports whether it did.
func (c *labelCap) forget(v string) bool {
	_, ok := c.kept[v]
	delete(c.kept, v)
	return ok
}

// queueLabel is the queue label of a metric about queue: the name for the
// first maxQueueLabels queues seen (of at most maxLabelBytes), otherLabel
// for the rest. Every per-queue metric labels its series with it, so that
// their queue labels, together, stay within the bound.
func (m *metrics) queueLabel(queue string) string {
	m.typesMu.Lock()
	defer m.typesMu.Unlock()
	return m.queues.label(queue)
}
