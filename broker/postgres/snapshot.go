package postgres

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// snapshot is a PostgreSQL snapshot (pg_current_snapshot()): which
// transactions' effects a read under it saw. A resync reads the hints
// under one, and another node's notification whose transactions it saw
// is not applied again (events.go).
type snapshot struct {
	xmin, xmax uint64
	xip        []uint64 // in progress when it was taken: not seen
}

// parseSnapshot reads a snapshot's text form, "xmin:xmax:xip,xip,...".
func parseSnapshot(s string) (snapshot, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return snapshot{}, fmt.Errorf("snapshot %q: want xmin:xmax:xip", s)
	}
	var snap snapshot
	var err error
	if snap.xmin, err = strconv.ParseUint(parts[0], 10, 64); err != nil {
		return snapshot{}, fmt.Errorf("snapshot %q: %w", s, err)
	}
	if snap.xmax, err = strconv.ParseUint(parts[1], 10, 64); err != nil {
		return snapshot{}, fmt.Errorf("snapshot %q: %w", s, err)
	}
	if parts[2] != "" {
		for _, x := range strings.Split(parts[2], ",") {
			v, err := strconv.ParseUint(x, 10, 64)
			if err != nil {
				return snapshot{}, fmt.Errorf("snapshot %q: %w", s, err)
			}
			snap.xip = append(snap.xip, v)
		}
	}
	return snap, nil
}

// saw reports whether a read under snap saw the effects of transaction
// xid (committed: the caller knows it committed).
func (snap snapshot) saw(xid uint64) bool {
	return xid < snap.xmin || xid < snap.xmax && !slices.Contains(snap.xip, xid)
}
