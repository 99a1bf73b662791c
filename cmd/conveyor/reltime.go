package main

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
)

// Tables show times relative to now ("3m ago", "in 2h"): a column of them
// reads at a glance and stays narrow. The listings of one thing (task get,
// info) and --json keep the absolute time.

// showAgo is t relative to now, for a table cell; "-" when unset.
func showAgo(t *timestamppb.Timestamp) string {
	if t == nil {
		return "-"
	}
	return relTime(t.AsTime(), time.Now())
}

// relTime is t relative to now, in one unit rounded to the nearest (so a
// task due in 59m59s is "in 1h"): "just now" or "in <1m" under a minute,
// then minutes, hours up to two days, days. Its text is at most 8
// characters up to 999 days, no wider than the headers of the columns it
// fills.
func relTime(t, now time.Time) string {
	d := t.Sub(now)
	future := d > 0
	if !future {
		d = -d
	}
	var s string
	switch {
	case d < time.Minute && future:
		return "in <1m"
	case d < time.Minute:
		return "just now"
	case d < time.Hour-30*time.Second:
		s = fmt.Sprintf("%dm", d.Round(time.Minute)/time.Minute)
	case d < 48*time.Hour-30*time.Minute:
		s = fmt.Sprintf("%dh", d.Round(time.Hour)/time.Hour)
	default:
		s = fmt.Sprintf("%dd", d.Round(24*time.Hour)/(24*time.Hour))
	}
	if future {
		return "in " + s
	}
	return s + " ago"
}
