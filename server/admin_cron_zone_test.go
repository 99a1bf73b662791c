package server_test

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"connectrpc.com/connect"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// addZone puts a time zone named Conveyor/name (UTC, no transitions) in
// zoneDir and returns its name and a func that takes it away again.
func addZone(t *testing.T, name string) (string, func()) {
	t.Helper()
	// A TZif version 1 file: the header, six counts (one type, four bytes
	// of abbreviations), the type (offset 0, not DST, abbreviation 0), "UTC".
	tzif := append([]byte("TZif"), make([]byte, 16)...)
	for _, n := range []uint32{0, 0, 0, 0, 1, 4} {
		tzif = binary.BigEndian.AppendUint32(tzif, n)
	}
	tzif = append(tzif, 0, 0, 0, 0, 0, 0, 'U', 'T', 'C', 0)
	path := filepath.Join(zoneDir, "Conveyor", name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, tzif, 0o644); err != nil {
		t.Fatal(err)
	}
	return "Conveyor/" + name, func() {
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCronZoneGone: an entry whose CRON_TZ zone has gone from the system
// since it was stored (tzdata upgraded, the store moved to another
// machine) can still be changed where the change leaves its spec, and
// paused; a change that gives the spec again, a whole replace and a
// resume are refused, naming the zone.
func TestCronZoneGone(t *testing.T) {
	t.Parallel()
	zone, removeZone := addZone(t, "Gone")
	s := servertest.Start(t, server.Config{})
	admin := adminClient(t, s)
	entry := nightly("zone")
	entry.Spec = "CRON_TZ=" + zone + " 30 2 * * *"
	c, want := newCronEditor(t, admin, entry)
	removeZone()

	got, err := c.update(&conveyorv1.CronEntry{Payload: []byte(`{"v":2}`), Type: "nightly-v2"}, "payload", "type")
	want.Payload, want.Type = []byte(`{"v":2}`), "nightly-v2"
	requireEntry(t, "a change of payload and type after the zone went", got, err, want)

	paused, err := admin.PauseCron(context.Background(), connect.NewRequest(&conveyorv1.PauseCronRequest{Id: c.id}))
	if err != nil || !paused.Msg.GetPaused() {
		t.Fatalf("PauseCron after the zone went: %v, %v; want it paused", paused, err)
	}
	want.Paused, want.NextRunAt = true, nil

	_, err = c.update(&conveyorv1.CronEntry{Spec: entry.Spec}, "spec")
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), zone) {
		t.Errorf("a change giving the spec again: %v; want invalid_argument naming %s", err, zone)
	}
	_, err = c.update(c.stored())
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), zone) {
		t.Errorf("a whole replace: %v; want invalid_argument naming %s", err, zone)
	}
	_, err = admin.ResumeCron(context.Background(), connect.NewRequest(&conveyorv1.ResumeCronRequest{Id: c.id}))
	if connect.CodeOf(err) != connect.CodeFailedPrecondition || !strings.Contains(err.Error(), zone) {
		t.Errorf("ResumeCron: %v; want failed_precondition naming %s", err, zone)
	}
	requireEntry(t, "the entry after the refusals", c.stored(), nil, want)
}
