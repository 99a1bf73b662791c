package bolt

import (
	"context"
	"io"

	bbolt "go.etcd.io/bbolt"
)

// Backup writes a consistent copy of the file to w, as of one read
// transaction: every change committed before it started, none after. The
// copy is a complete bbolt file that Open accepts (a restore is copying it
// in place of conveyor.db with the server stopped). Writers go on
// meanwhile; only the file's growth past its mapped size waits for the
// copy to end (bbolt remaps only with no reader open).
func (e *Engine) Backup(ctx context.Context, w io.Writer) (int64, error) {
	var n int64
	err := e.view(func(tx *bbolt.Tx) error {
		var err error
		n, err = tx.WriteTo(ctxWriter{ctx, w})
		return err
	})
	return n, err
}

// ctxWriter stops a copy whose context ended.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c ctxWriter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}

var _ interface {
	Backup(context.Context, io.Writer) (int64, error)
} = (*Engine)(nil)
