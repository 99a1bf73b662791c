package postgres

import "testing"

func TestSnapshotSaw(t *testing.T) {
	snap, err := parseSnapshot("100:110:102,105")
	if err != nil {
		t.Fatal(err)
	}
	for xid, want := range map[uint64]bool{99: true, 100: true, 101: true, 102: false, 105: false, 109: true, 110: false, 200: false} {
		if got := snap.saw(xid); got != want {
			t.Errorf("saw(%d) = %v, want %v", xid, got, want)
		}
	}
	if !snap.sawAll([]uint64{99, 101}) || snap.sawAll([]uint64{99, 102}) || snap.sawAll(nil) {
		t.Error("sawAll is not every xid seen")
	}
	if empty, err := parseSnapshot("7:7:"); err != nil || !empty.saw(6) || empty.saw(7) {
		t.Errorf("snapshot 7:7: %+v, %v", empty, err)
	}
	for _, bad := range []string{"", "1:2", "a:2:", "1:b:", "1:2:c"} {
		if _, err := parseSnapshot(bad); err == nil {
			t.Errorf("parseSnapshot(%q) accepted", bad)
		}
	}
}
