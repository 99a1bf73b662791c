package broker

import "time"

// HistoryPoint is what a queue did in one bucket: the tasks enqueued into
// it, and the attempts that completed and that failed.
type HistoryPoint struct {
	Bucket    time.Time
	Enqueued  int64
	Completed int64
	Failed    int64
}

// HistoryPoints turns one queue's samples of one resolution (oldest first)
// and its counters at now into one point per bucket: what happened from
// each sample to the next one, or to now for the last, belongs to the
// first one's bucket; a bucket with no sample saw nothing (the server was
// down: nothing was enqueued or worked). The points run from the first
// sampled bucket, or the first of the resolution's span, to now's; a
// queue never sampled (created since the last sample) counts from zero
// in now's bucket. A counter that went down was reset (the queue was
// deleted and made again): the later figure is what happened since.
func HistoryPoints(res HistoryResolution, samples []HistorySample, live HistoryCounters, now time.Time) []HistoryPoint {
	last := res.Bucket(now)
	if len(samples) == 0 {
		samples = []HistorySample{{HistoryCounters: HistoryCounters{Queue: live.Queue}, Bucket: last}}
	}
	from := last.Add(-res.Span() + res.Width())
	if first := res.Bucket(samples[0].Bucket); first.After(from) {
		from = first
	}
	if from.After(last) {
		return nil
	}
	points := make([]HistoryPoint, int(last.Sub(from)/res.Width())+1)
	for i := range points {
		points[i].Bucket = from.Add(time.Duration(i) * res.Width())
	}
	for i, s := range samples {
		next := live
		if i+1 < len(samples) {
			next = samples[i+1].HistoryCounters
		}
		b := res.Bucket(s.Bucket)
		if b.Before(from) || b.After(last) {
			continue
		}
		p := &points[b.Sub(from)/res.Width()]
		processed := grew(s.Processed, next.Processed)
		p.Enqueued += grew(s.Enqueued, next.Enqueued)
		p.Failed += grew(s.Failed, next.Failed)
		p.Completed += max(processed-grew(s.Failed, next.Failed), 0)
	}
	return points
}

// grew is how much a counter grew from was to is; one that went down was
// reset to zero in between, and grew by is since.
func grew(was, is int64) int64 {
	if is < was {
		return is
	}
	return is - was
}

// SumHistory adds several queues' points (each dense, as HistoryPoints
// returns them, of one resolution) bucket by bucket.
func SumHistory(res HistoryResolution, series ...[]HistoryPoint) []HistoryPoint {
	var from, last time.Time
	for _, s := range series {
		if len(s) == 0 {
			continue
		}
		if from.IsZero() || s[0].Bucket.Before(from) {
			from = s[0].Bucket
		}
		if l := s[len(s)-1].Bucket; l.After(last) {
			last = l
		}
	}
	if from.IsZero() {
		return nil
	}
	out := make([]HistoryPoint, int(last.Sub(from)/res.Width())+1)
	for i := range out {
		out[i].Bucket = from.Add(time.Duration(i) * res.Width())
	}
	for _, s := range series {
		for _, p := range s {
			o := &out[p.Bucket.Sub(from)/res.Width()]
			o.Enqueued += p.Enqueued
			o.Completed += p.Completed
			o.Failed += p.Failed
		}
	}
	return out
}
