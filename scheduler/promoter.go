package scheduler

import (
	"log/slog"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

// NewPromoter returns the loop that makes due SCHEDULED and RETRY tasks
// pending and archives waiting tasks whose expiry passed (the broker's
// timed indexes say which, and when to look next). Due times are
// wall-clock times: it reads the clock at least every DefaultMaxSleep.
func NewPromoter(b broker.Broker, now func() time.Time, log *slog.Logger) *Loop {
	l := NewLoop("promoter", b.PromoteDue, now, log)
	l.SetMaxSleep(DefaultMaxSleep)
	return l
}
