package bolt

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strings"

	bbolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	"github.com/conveyor-dev/conveyor/broker"
	storagev1 "github.com/conveyor-dev/conveyor/gen/conveyor/storage/v1"
)

// Bounds of one ListTasks call: a page stops early, with a cursor to go
// on, once it holds listMaxBytes of payloads or has examined
// listMaxExamined tasks that a search did not match.
const (
	listMaxBytes    = 4 << 20
	listMaxExamined = 10_000
)

// ListTasks returns a page of a queue's tasks from the listing index; see
// broker.Broker. A page costs what it returns (plus, with a search, what
// it examines), whatever the queue holds: the index keeps each (queue,
// state, type) range contiguous and in id order.
func (e *Engine) ListTasks(ctx context.Context, p broker.ListParams) (broker.ListPage, error) {
	from, err := decodeCursor(p.Cursor)
	if err != nil {
		return broker.ListPage{}, err
	}
	if err := e.Sync(ctx); err != nil {
		return broker.ListPage{}, err
	}
	limit := max(p.Limit, 1)
	states := []broker.State{p.State}
	if p.State == broker.StateUnspecified {
		states = states[:0]
		for s := broker.StateScheduled; s < broker.NumStates; s++ {
			states = append(states, s)
		}
	}
	var page broker.ListPage
	err = e.view(func(tx *bbolt.Tx) error {
		l := lister{tx: tx, p: p, limit: limit, queuePrefix: indexPrefix(p.Queue, 0)[:2+len(p.Queue)]}
		for _, s := range states {
			if from != nil && s < broker.State(from[0]) {
				continue
			}
			done, err := l.scan(s, from)
			if err != nil || done {
				page = l.page
				return err
			}
		}
		page = l.page
		return nil
	})
	return page, err
}

// lister is one ListTasks call's scan.
type lister struct {
	tx          *bbolt.Tx
	p           broker.ListParams
	limit       int
	queuePrefix []byte
	page        broker.ListPage
	bytes       int
	examined    int
}

// scan lists state s's range from the cursor (when it is in this state),
// and reports whether the page is full (page.Next then set).
func (l *lister) scan(s broker.State, from []byte) (bool, error) {
	prefix := indexPrefix(l.p.Queue, s)
	if l.p.Type != "" {
		prefix = indexPrefix(l.p.Queue, s, l.p.Type)
	}
	c := l.tx.Bucket(bucketIndex).Cursor()
	k, _ := c.Seek(prefix)
	if from != nil && broker.State(from[0]) == s {
		start := append(append([]byte(nil), l.queuePrefix...), from...)
		if bytes.Compare(start, prefix) > 0 {
			k, _ = c.Seek(start)
			if bytes.Equal(k, start) {
				k, _ = c.Next() // the cursor names the last task returned
			}
		}
	}
	for ; k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		if len(l.page.Tasks) == l.limit || l.bytes >= listMaxBytes || l.examined >= listMaxExamined {
			l.page.Next = encodeCursor(l.lastKey(k, c))
			return true, nil
		}
		var id key
		copy(id[:], k[len(k)-len(id):])
		task, err := l.load(id)
		if err != nil {
			return false, err
		}
		if task == nil {
			continue
		}
		if l.p.Search != "" && !matches(task, l.p.Search) {
			l.examined++
			continue
		}
		l.page.Tasks = append(l.page.Tasks, task)
		l.bytes += len(task.Payload)
	}
	return false, nil
}

// lastKey is the cursor for a page that stops before entry k: the entry
// before it (c is positioned at k).
func (l *lister) lastKey(k []byte, c *bbolt.Cursor) []byte {
	prev, _ := c.Prev()
	if prev == nil || !bytes.HasPrefix(prev, l.queuePrefix) {
		// Nothing before k in this queue: start again at k itself, which
		// the next call seeks to (and, being no returned task, keeps).
		return bytes.Clone(k[len(l.queuePrefix):])
	}
	return bytes.Clone(prev[len(l.queuePrefix):])
}

// load reads a task's records (nil when the index is ahead of them, which
// a transaction never sees, or the task is gone).
func (l *lister) load(k key) (*broker.Task, error) {
	sv := l.tx.Bucket(bucketTasks).Get(k[:])
	stv := l.tx.Bucket(bucketLive).Get(k[:])
	if stv == nil {
		stv = l.tx.Bucket(bucketDone).Get(k[:])
	}
	if sv == nil || stv == nil {
		return nil, nil
	}
	spec := &storagev1.TaskSpec{}
	st := &storagev1.TaskStatus{}
	if err := proto.Unmarshal(sv, spec); err != nil {
		return nil, fmt.Errorf("spec of %s: %w", k, err)
	}
	if err := proto.Unmarshal(stv, st); err != nil {
		return nil, fmt.Errorf("status of %s: %w", k, err)
	}
	return taskFrom(k, spec, st), nil
}

// matches reports whether a task's id, one of its metadata values or its
// payload contains s (case-sensitive).
func matches(t *broker.Task, s string) bool {
	if strings.Contains(t.ID, s) || bytes.Contains(t.Payload, []byte(s)) {
		return true
	}
	for _, v := range t.Metadata {
		if strings.Contains(v, s) {
			return true
		}
	}
	return false
}

// A cursor is the listing-index key of the last task returned, without
// its queue: state (1 byte), type (length-prefixed), id.
func encodeCursor(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func decodeCursor(s string) ([]byte, error) {
	if s == "" {
		return nil, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	bad := fmt.Errorf("page token %q was not issued by this listing: %w", s, broker.ErrInvalidArgument)
	if err != nil || len(b) < 1+2+16 || !broker.State(b[0]).Valid() {
		return nil, bad
	}
	if n := int(binary.BigEndian.Uint16(b[1:3])); len(b) != 1+2+n+16 {
		return nil, bad
	}
	return b, nil
}
