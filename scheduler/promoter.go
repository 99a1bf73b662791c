package scheduler

import (
	"log/slog"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

// NewPromoter returns the loop that makes due SCHEDULED and RETRY tasks
// pending and archives waiting tasks whose expiry passed (the broker's
// timed indexes say which, and when to look next).
func NewPromoter(b broker.Broker, now func() time.Time, log *slog.Logger) *Loop {
	return NewLoop("promoter", b.PromoteDue, now, log)
}
