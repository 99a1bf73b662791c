package postgres

import (
	"context"
	"fmt"

	"github.com/conveyor-dev/conveyor/broker"
)

var _ broker.StartAuthorizer = (*Engine)(nil)

// AuthorizeStart marks the current attempt of an at-most-once task as
// started; see broker.StartAuthorizer. The mark (start_authorized) is set
// on the row the lease names, fenced as a Result is, and committed
// durably whatever the database's synchronous_commit says: a start
// authorized and then lost in a crash would let the task run twice. Every
// path that takes the task out of ACTIVE, or leases it again, clears it;
// while it is set, an end with no verdict archives the task
// (Decision.StartAuthorized, releaseLeases).
func (e *Engine) AuthorizeStart(ctx context.Context, p broker.StartParams) error {
	return e.inTx(ctx, func(t *txn) error {
		lt, err := t.currentLease(ctx, p.SessionID, p.Lease)
		switch {
		case err != nil:
			return err
		case !lt.atMostOnce:
			return nil
		case lt.canceled:
			return fmt.Errorf("task %s was canceled while it waited to start: %w", lt.id, broker.ErrInvalidState)
		case lt.startAuthorized:
			return nil
		}
		if _, err := t.exec(ctx, `SET LOCAL synchronous_commit TO on`); err != nil {
			return err
		}
		_, err = t.exec(ctx, `UPDATE conveyor_tasks SET start_authorized = true WHERE id = $1`, lt.id)
		return err
	})
}
