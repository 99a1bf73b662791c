package conveyor

import (
	"testing"

	"github.com/conveyor-dev/conveyor/server"
)

// TestBoundsAreTheServers pins every bound the SDK keeps on what it sends
// to the server's own constant: the SDK may not import the server, so it
// holds copies, and a copy that drifts would let a Worker send what the
// server refuses (costing a session) or cut what it would accept.
func TestBoundsAreTheServers(t *testing.T) {
	t.Parallel()
	for _, b := range []struct {
		sdk, server string
		mine, its   int
	}{
		{"maxNameBytes", "MaxNameBytes", maxNameBytes, server.MaxNameBytes},
		{"MaxResultBytes", "MaxResultBytes", MaxResultBytes, server.MaxResultBytes},
		{"MaxErrorMessageBytes", "MaxErrorMessageBytes", MaxErrorMessageBytes, server.MaxErrorMessageBytes},
		{"MaxProgressMessageBytes", "MaxProgressMessageBytes", MaxProgressMessageBytes, server.MaxProgressMessageBytes},
		{"maxFrameBytes", "MaxRequestBytes", maxFrameBytes, server.MaxRequestBytes},
		{"maxHeartbeatIDs", "MaxHeartbeatIDs", maxHeartbeatIDs, server.MaxHeartbeatIDs},
		{"batchMaxItems", "MaxBatchItems", batchMaxItems, server.MaxBatchItems},
		{"maxLabelBytes", "MaxLabelBytes", maxLabelBytes, server.MaxLabelBytes},
	} {
		if b.mine != b.its {
			t.Errorf("the SDK's %s is %d; the server's %s is %d", b.sdk, b.mine, b.server, b.its)
		}
	}
	if batchMaxBytes > server.MaxRequestBytes {
		t.Errorf("the SDK gathers enqueue batches of up to %d bytes, past the server's MaxRequestBytes %d", batchMaxBytes, server.MaxRequestBytes)
	}
}
