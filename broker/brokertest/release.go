package brokertest

import (
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

func releaseCases() []testCase {
	return []testCase{
		{name: "RankedByFirstSight", env: testReleasesRanked},
	}
}

// testReleasesRanked: a release keeps its first sighting whenever it is
// seen again, across a restart too; releases list the newest first; a
// drain is recorded and kept; draining an unknown release is ErrNotFound.
func testReleasesRanked(t *testing.T, e *Env) {
	rr := func() broker.ReleaseRegistry {
		r, ok := e.B.(broker.ReleaseRegistry)
		if !ok {
			t.Fatalf("%T does not implement broker.ReleaseRegistry", e.B)
		}
		return r
	}
	see := func(id string, at time.Time) broker.Release {
		t.Helper()
		r, err := rr().SeeRelease(t.Context(), id, at)
		if err != nil {
			t.Fatalf("SeeRelease(%q): %v", id, err)
		}
		return r
	}
	if r := see("v1", T0); !r.FirstSeen.Equal(T0) || r.Draining {
		t.Fatalf("first sight of v1: %+v", r)
	}
	see("v2", T0.Add(time.Minute))
	if r := see("v1", T0.Add(time.Hour)); !r.FirstSeen.Equal(T0) {
		t.Fatalf("v1 seen again: first seen %v, want %v", r.FirstSeen, T0)
	}
	if r, err := rr().DrainRelease(t.Context(), "v1"); err != nil || !r.Draining {
		t.Fatalf("DrainRelease(v1) = %+v, %v", r, err)
	}
	_, err := rr().DrainRelease(t.Context(), "v9")
	requireErrIs(t, "DrainRelease of a release never seen", err, broker.ErrNotFound)

	e.Reopen()
	see("v1", T0.Add(2*time.Hour))
	see("v3", T0.Add(30*time.Second))
	rs, err := rr().Releases(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := []broker.Release{{ID: "v2", FirstSeen: T0.Add(time.Minute)}, {ID: "v3", FirstSeen: T0.Add(30 * time.Second)},
		{ID: "v1", FirstSeen: T0, Draining: true}}
	if len(rs) != len(want) {
		t.Fatalf("Releases = %+v, want %+v", rs, want)
	}
	for i := range want {
		if rs[i].ID != want[i].ID || !rs[i].FirstSeen.Equal(want[i].FirstSeen) || rs[i].Draining != want[i].Draining {
			t.Fatalf("Releases = %+v, want %+v", rs, want)
		}
	}
}
