package bench

import (
	"strings"
	"testing"
)

// TestWorkersOnlyWhereSessionsWork: --workers is taken by W3 and W4 and
// refused, with the reason, by the other workloads and with --push.
func TestWorkersOnlyWhereSessionsWork(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string // "" when taken
	}{
		{Config{Workload: "W3", Workers: 4, Addr: "http://x"}, ""},
		{Config{Workload: "w4", Workers: 2, Addr: "http://x"}, ""},
		{Config{Workload: "W1", Workers: 2, Addr: "http://x"}, "applies to W3 and W4, not W1"},
		{Config{Workload: "W3", Workers: 2, Push: true, PushSecret: "whsec_x", Addr: "http://x"}, "with --push one endpoint"},
	} {
		err := c.cfg.setDefaults()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v refused: %v", c.cfg, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%+v: %v, want an error saying %q", c.cfg, err, c.want)
		}
	}
}
