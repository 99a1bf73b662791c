package server

import (
	"slices"
	"sort"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// nodeLabel is the label every series carries on an engine several nodes
// share: the node it comes from, so that the nodes' series stay apart
// when one Prometheus scrapes them all (or one address leads to any).
const nodeLabel = "node"

// nodeGatherer adds the node label to every series gathered, with the
// node's id at the time of the scrape: a node that was declared dead and
// rejoined under a new id reports under the new one at once, with nothing
// registered again. On an engine with no node id (the embedded engine)
// the series are left as they are, so that dashboards built on them do
// not change.
type nodeGatherer struct {
	prometheus.Gatherer
	node func() string
}

// Gather gathers and labels. The families are the gathering's own (built
// afresh on each call), so labelling them in place is safe.
func (g nodeGatherer) Gather() ([]*dto.MetricFamily, error) {
	mfs, err := g.Gatherer.Gather()
	id := g.node()
	if id == "" {
		return mfs, err
	}
	name := nodeLabel
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			// The labels come in name order, and stay so.
			i := sort.Search(len(m.Label), func(i int) bool { return m.Label[i].GetName() > name })
			m.Label = slices.Insert(m.Label, i, &dto.LabelPair{Name: &name, Value: &id})
		}
	}
	return mfs, err
}
