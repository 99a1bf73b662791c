package main

import (
	"testing"
	"time"
)

func TestCLIRelativeTime(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 2, 15, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "just now"},
		{-59 * time.Second, "just now"},
		{30 * time.Second, "in <1m"},
		{-time.Minute, "1m ago"},
		{-3*time.Minute - 29*time.Second, "3m ago"},
		{-3*time.Minute - 30*time.Second, "4m ago"},
		{59*time.Minute + 29*time.Second, "in 59m"},
		{59*time.Minute + 59*time.Second, "in 1h"}, // --process-in 1h, a second later
		{2*time.Hour + 10*time.Minute, "in 2h"},
		{-47 * time.Hour, "47h ago"},
		{-48 * time.Hour, "2d ago"},
		{400 * 24 * time.Hour, "in 400d"},
	} {
		if got := relTime(now.Add(tc.d), now); got != tc.want {
			t.Errorf("%v from now: %q, want %q", tc.d, got, tc.want)
		}
	}
	if got := showAgo(nil); got != "-" {
		t.Errorf("unset: %q", got)
	}
}
