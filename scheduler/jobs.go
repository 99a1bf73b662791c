package scheduler

import (
	"log/slog"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

// NewPromoter returns the loop that makes due tasks pending and archives
// expired waiting ones.
func NewPromoter(b broker.Broker, now func() time.Time, log *slog.Logger) *Loop {
	return NewLoop("promoter", b.PromoteDue, now, log)
}

// NewPurger returns the loop that deletes terminal tasks past their retention.
func NewPurger(b broker.Broker, now func() time.Time, log *slog.Logger) *Loop {
	return NewLoop("purger", b.Purge, now, log)
}
