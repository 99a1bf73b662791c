package scheduler_test

import (
	"strings"
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/scheduler"
)

// FuzzCronSpec feeds arbitrary specs to the parser CreateCron uses: it
// must not panic (ParseCronSpec would refuse such a spec, and say so), a
// refusal names the spec, and an accepted spec fires strictly later each
// time it is asked.
func FuzzCronSpec(f *testing.F) {
	for _, seed := range []string{
		"* * * * *", "*/5 * * * * *", "0 0 1 1 *", "@hourly", "@every 1m30s", "@every 0s",
		"CRON_TZ=Asia/Tokyo 0 9 * * MON-FRI", "TZ=UTC 1-59/7 * * * *", "0 0 30 2 *", "L * * * *",
		"CRON_TZ=", "@every ", "5-2 * * * *", "*/0 * * * *", "0 0 ? * *", "0 0 * * 7",
	} {
		f.Add(seed)
	}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, spec string) {
		s, err := scheduler.ParseCronSpec(spec, now)
		if err != nil {
			if strings.Contains(err.Error(), "panicked") {
				t.Fatalf("the parser panicked on %q: %v", spec, err)
			}
			if !strings.Contains(err.Error(), "spec") {
				t.Fatalf("the refusal of %q does not name the spec: %v", spec, err)
			}
			return
		}
		at := now
		for range 3 {
			next := s.Next(at)
			if next.IsZero() {
				return // a schedule may end (a date that recurs no more)
			}
			if !next.After(at) {
				t.Fatalf("%q: Next(%s) = %s, not later", spec, at, next)
			}
			at = next
		}
	})
}
