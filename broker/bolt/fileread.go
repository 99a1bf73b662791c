package bolt

import (
	"context"
	"fmt"

	bbolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	storagev1 "github.com/conveyor-dev/conveyor/gen/conveyor/storage/v1"
)

// fileRead is what a call reads from the file before it takes Engine.mu,
// for the decisions it then makes under the mutex. A read transaction is
// not begun under the mutex while a commit may be in flight: a commit that
// must remap the file waits for every open reader (a Backup's too), bbolt
// makes new readers wait behind it, and a reader begun under the mutex
// would hold every broker call up for as long as the backup takes.
//
// What was read is current for a task that memory holds neither live nor
// settling when no commit has been applied to memory since its transaction
// began (Engine.currentLocked): every change to a task is decided under the
// mutex, and the task stays live or settling in memory until the commit
// that makes the change durable is applied. Otherwise the caller reads
// again. A Purge changes the file without a decision per task; callers
// that depend on a terminal task staying as it is check purgeMayTakeLocked.
type fileRead struct {
	txid uint64
	// specs says, for each key asked, whether the file holds its spec.
	specs map[key]bool
	// done holds, for each key asked, its terminal status (nil: none).
	done map[key]*storagev1.TaskStatus
	// full holds, for each key asked whose spec the file holds, the spec.
	full map[key]*storagev1.TaskSpec
}

// noRead is the read of nothing; it is never written to.
var noRead fileRead

// readFile reads the specs' presence, the terminal statuses and the whole
// specs of the given keys in one read transaction. Engine.mu must not be held, but by
// lockAndRead with no commit in flight.
func (e *Engine) readFile(specs, done, full []key) (*fileRead, error) {
	if len(specs)+len(done)+len(full) == 0 {
		return &noRead, nil // most enqueues
	}
	r := &fileRead{specs: make(map[key]bool, len(specs)), done: make(map[key]*storagev1.TaskStatus, len(done))}
	if len(full) > 0 {
		r.full = make(map[key]*storagev1.TaskSpec, len(full))
	}
	err := e.view(func(tx *bbolt.Tx) error {
		r.txid = uint64(tx.ID())
		tb := tx.Bucket(bucketTasks)
		for _, k := range specs {
			r.specs[k] = tb.Get(k[:]) != nil
		}
		db := tx.Bucket(bucketDone)
		for _, k := range done {
			v := db.Get(k[:])
			if v == nil {
				r.done[k] = nil
				continue
			}
			st := &storagev1.TaskStatus{}
			if err := proto.Unmarshal(v, st); err != nil {
				return fmt.Errorf("status of %s: %w", k, err)
			}
			r.done[k] = st
		}
		for _, k := range full {
			if v := tb.Get(k[:]); v != nil {
				spec := &storagev1.TaskSpec{}
				if err := proto.Unmarshal(v, spec); err != nil {
					return fmt.Errorf("spec of %s: %w", k, err)
				}
				r.full[k] = spec
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// maxStaleReads is how many reads before the lock a call makes before it
// reads under the lock instead (lockAndRead).
const maxStaleReads = 2

// lockAndRead reads the specs' presence and the terminal statuses of the
// given keys (see readFile) and returns with Engine.mu held and the read
// current, or with an error and the mutex not held. It reads before taking
// the mutex; a read that a commit overtook is made again. A read that
// keeps being overtaken (a long one while commits keep coming) would never
// end: after maxStaleReads the read is made under the mutex, once no commit
// is in flight. The committer needs the mutex to start the next one, so no
// commit can be waiting to remap the file, and bbolt cannot make that read
// wait for a Backup.
func (e *Engine) lockAndRead(ctx context.Context, specs, done, full []key) (*fileRead, error) {
	for stale := 0; stale < maxStaleReads; stale++ {
		r, err := e.readFile(specs, done, full)
		if err != nil {
			return nil, err
		}
		e.mu.Lock()
		if e.closed {
			e.mu.Unlock()
			return nil, errClosed
		}
		if e.currentLocked(r) {
			return r, nil
		}
		e.mu.Unlock()
	}
	for {
		e.mu.Lock()
		if e.closed {
			e.mu.Unlock()
			return nil, errClosed
		}
		b := e.commit.inflight
		if b == nil {
			break
		}
		e.mu.Unlock()
		if err := e.commit.wait(ctx, b); err != nil && ctx.Err() != nil {
			return nil, err
		}
	}
	r, err := e.readFile(specs, done, full)
	if err != nil {
		e.mu.Unlock()
		return nil, err
	}
	return r, nil
}

// currentLocked reports whether r shows the file as memory knows it: no
// commit has been applied to memory since r's transaction began.
// A read of nothing is always current.
func (e *Engine) currentLocked(r *fileRead) bool {
	return len(r.specs)+len(r.done)+len(r.full) == 0 || e.commit.applied <= r.txid
}

// purgeMayTakeLocked reports whether a Purge that is not durable yet may
// delete the terminal task whose status st is.
func (e *Engine) purgeMayTakeLocked(st *storagev1.TaskStatus) bool {
	if e.purging == 0 {
		return false
	}
	h := e.purgeHorizons
	if at := st.GetPurgeAt(); at != 0 {
		return at <= h[0]
	}
	return st.GetCompletedAt() <= h[1+classOf(stateOf(st))]
}
