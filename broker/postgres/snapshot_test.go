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
	if empty, err := parseSnapshot("7:7:"); err != nil || !empty.saw(6) || empty.saw(7) {
		t.Errorf("snapshot 7:7: %+v, %v", empty, err)
	}
	for _, bad := range []string{"", "1:2", "a:2:", "1:b:", "1:2:c"} {
		if _, err := parseSnapshot(bad); err == nil {
			t.Errorf("parseSnapshot(%q) accepted", bad)
		}
	}
}

// TestSplitKeepsEveryTransaction: a message too long for one
// notification is cut by transactions, in order, none lost, the rest of
// the message with the first part.
func TestSplitKeepsEveryTransaction(t *testing.T) {
	m := &message{From: "me", Promote: 7, Crons: true}
	for i := range 50 {
		m.Txns = append(m.Txns, wireTxn{XID: uint64(i + 1)})
	}
	parts := split(m)
	var xids []uint64
	for i, p := range parts {
		if p.From != "me" || (i == 0) != (p.Promote == 7 && p.Crons) {
			t.Errorf("part %d: %+v", i, p)
		}
		for _, tx := range p.Txns {
			xids = append(xids, tx.XID)
		}
	}
	if len(parts) != 3 || len(xids) != 50 {
		t.Fatalf("%d parts with %d transactions, want 3 with 50", len(parts), len(xids))
	}
	for i, x := range xids {
		if x != uint64(i+1) {
			t.Fatalf("transaction %d is %d: out of order", i, x)
		}
	}
}
