package bolt

import (
	"bytes"
	"container/heap"
	"context"
	"encoding/base64"
	"fmt"
	"strings"

	bbolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	"github.com/conveyor-dev/conveyor/broker"
	storagev1 "github.com/conveyor-dev/conveyor/gen/conveyor/storage/v1"
)

// Bounds of one ListTasks call: a page stops early, with a cursor to go
// on, once it holds listMaxBytes of task bytes (answerBytes) or has examined
// listMaxExamined tasks that a search (or a group filter) did not match.
const (
	listMaxBytes    = 4 << 20
	listMaxExamined = 10_000
)

// ListTasks returns a page of a queue's tasks from the listing index; see
// broker.Broker. Tasks come in id order (enqueue order, for server-made
// ids), whatever their types and, in a listing of every state, their
// states: the index keeps each (queue, state, type) range contiguous and
// in id order, and a listing merges the ranges it covers. So a task that
// changes state between two pages is still met once, at its id, in the
// state it has then. A page costs what it returns (plus, with a search,
// what it examines, and a seek per (state, type) range it covers),
// whatever the queue holds. A descending listing walks the same ranges
// backwards.
func (e *Engine) ListTasks(ctx context.Context, p broker.ListParams) (broker.ListPage, error) {
	from, err := decodeCursor(p.Cursor, p.State, p.Descending)
	if err != nil {
		return broker.ListPage{}, err
	}
	if err := e.Sync(ctx); err != nil {
		return broker.ListPage{}, err
	}
	var page broker.ListPage
	err = e.view(func(tx *bbolt.Tx) error {
		l := lister{tx: tx, index: tx.Bucket(bucketIndex), p: p, limit: max(p.Limit, 1)}
		err := l.scan(from)
		page = l.page
		return err
	})
	return page, err
}

// lister is one ListTasks call's scan.
type lister struct {
	tx       *bbolt.Tx
	index    *bbolt.Bucket
	p        broker.ListParams
	limit    int
	page     broker.ListPage
	bytes    int
	examined int
}

// scan lists the listing's tasks from id from on, in id order (or its
// reverse), until the page is full (page.Next then set) or none is left.
func (l *lister) scan(from key) error {
	runs := l.runs(from)
	for runs.Len() > 0 {
		r := runs.runs[0]
		id := r.id()
		if len(l.page.Tasks) == l.limit || l.bytes >= listMaxBytes || l.examined >= listMaxExamined {
			l.page.Next = encodeCursor(l.p.State, l.p.Descending, id)
			return nil
		}
		if r.next() {
			heap.Fix(&runs, 0)
		} else {
			heap.Pop(&runs)
		}
		task, err := l.load(id)
		if err != nil {
			return err
		}
		if task == nil {
			continue
		}
		if (l.p.Search != "" && !matches(task, l.p.Search)) || (l.p.Group != "" && task.Group != l.p.Group) {
			l.examined++
			continue
		}
		if l.p.Brief {
			brief(task)
		}
		l.page.Tasks = append(l.page.Tasks, task)
		l.bytes += answerBytes(task)
	}
	return nil
}

// answerBytes is about what a task adds to a listing's answer: its
// payload, result and metadata, and the messages of its errors. They are
// what a task can make large (up to 1 MiB each for the payload and the
// result): counting only the payload let a page of a thousand completed
// tasks with large results reach a gigabyte.
func answerBytes(t *broker.Task) int {
	n := len(t.Payload) + len(t.Result) + len(t.LastError) + len(t.ProgressMessage)
	for k, v := range t.Metadata {
		n += len(k) + len(v)
	}
	for _, e := range t.Errors {
		n += len(e.Message)
	}
	return n
}

// brief drops what answerBytes counts from a task of a Brief listing.
func brief(t *broker.Task) {
	t.Payload, t.Result, t.Metadata, t.Errors = nil, nil, nil, nil
	t.LastError, t.ProgressMessage = "", ""
}

// The stored fields brief drops, by number.
var (
	briefSpecFields   = fieldNumbers(&storagev1.TaskSpec{}, "payload", "metadata")
	briefStatusFields = fieldNumbers(&storagev1.TaskStatus{}, "result", "errors", "last_error", "progress_message")
)

// runs positions a cursor on each (queue, state, type) range the listing
// covers (its state or every state; its type or every type), at the
// range's first task at or after from (at or before it, descending), and
// returns those that have one, as a heap by id.
func (l *lister) runs(from key) runHeap {
	states := []broker.State{l.p.State}
	if l.p.State == broker.StateUnspecified {
		states = states[:0]
		for s := broker.StateScheduled; s < broker.NumStates; s++ {
			states = append(states, s)
		}
	}
	var prefixes [][]byte
	for _, s := range states {
		if l.p.Type != "" {
			prefixes = append(prefixes, indexPrefix(l.p.Queue, s, l.p.Type))
		} else {
			prefixes = append(prefixes, l.typePrefixes(indexPrefix(l.p.Queue, s))...)
		}
	}
	h := runHeap{desc: l.p.Descending}
	for _, prefix := range prefixes {
		r := &run{c: l.index.Cursor(), prefix: prefix, desc: l.p.Descending}
		r.k, _ = r.c.Seek(append(bytes.Clone(prefix), from[:]...))
		if r.desc && (r.k == nil || !r.valid() || r.id() != from) {
			// Seek lands on the first entry at or after from; descending,
			// the run starts at the last one before it.
			if r.k == nil {
				r.k, _ = r.c.Last()
			} else {
				r.k, _ = r.c.Prev()
			}
		}
		if r.valid() {
			h.runs = append(h.runs, r)
		}
	}
	heap.Init(&h)
	return h
}

// typePrefixes returns the prefix of each type's range within the
// (queue, state) range that prefix names: one seek per type.
func (l *lister) typePrefixes(prefix []byte) [][]byte {
	var out [][]byte
	c := l.index.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && len(k) >= len(prefix)+len(key{}); {
		typ := bytes.Clone(k[:len(k)-len(key{})])
		out = append(out, typ)
		// Past every id of this type: the range's keys are typ + 16 bytes.
		k, _ = c.Seek(append(append(bytes.Clone(typ), bytes.Repeat([]byte{0xff}, len(key{}))...), 0))
	}
	return out
}

// run is a cursor over one (queue, state, type) range of the index,
// forwards or (desc) backwards.
type run struct {
	c      *bbolt.Cursor
	prefix []byte
	k      []byte // the current entry
	desc   bool
}

func (r *run) valid() bool {
	return r.k != nil && bytes.HasPrefix(r.k, r.prefix) && len(r.k) == len(r.prefix)+len(key{})
}

func (r *run) id() key {
	var id key
	copy(id[:], r.k[len(r.prefix):])
	return id
}

// next moves to the range's next entry (its previous one, descending) and
// reports whether there is one.
func (r *run) next() bool {
	if r.desc {
		r.k, _ = r.c.Prev()
	} else {
		r.k, _ = r.c.Next()
	}
	return r.valid()
}

// runHeap orders runs by their current id, lowest first (highest first,
// desc).
type runHeap struct {
	runs []*run
	desc bool
}

func (h runHeap) Len() int { return len(h.runs) }
func (h runHeap) Less(i, j int) bool {
	a, b := h.runs[i], h.runs[j]
	c := bytes.Compare(a.k[len(a.prefix):], b.k[len(b.prefix):])
	if h.desc {
		return c > 0
	}
	return c < 0
}
func (h runHeap) Swap(i, j int) { h.runs[i], h.runs[j] = h.runs[j], h.runs[i] }
func (h *runHeap) Push(x any)   { h.runs = append(h.runs, x.(*run)) }
func (h *runHeap) Pop() any {
	r := h.runs[len(h.runs)-1]
	h.runs = h.runs[:len(h.runs)-1]
	return r
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
	if l.p.Brief && l.p.Search == "" {
		// Not even decoded: a megabyte payload or result would be
		// copied only to be dropped.
		sv, stv = withoutFields(sv, briefSpecFields), withoutFields(stv, briefStatusFields)
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

// A cursor is the listing's state (1 byte, 0 for every state, with
// cursorDescending set for a descending listing) and the id (16 bytes) of
// the next task to examine. A cursor of another listing's state or
// direction is refused: its position would mean nothing there.
func encodeCursor(state broker.State, desc bool, next key) string {
	head := byte(state)
	if desc {
		head |= cursorDescending
	}
	return base64.RawURLEncoding.EncodeToString(append([]byte{head}, next[:]...))
}

// cursorDescending marks the cursor of a descending listing.
const cursorDescending = 0x80

// decodeCursor returns the id a listing of state goes on from: for an
// empty cursor, the start (the zero key, or the greatest one descending).
func decodeCursor(s string, state broker.State, desc bool) (key, error) {
	var from key
	if s == "" {
		if desc {
			for i := range from {
				from[i] = 0xff
			}
		}
		return from, nil
	}
	head := byte(state)
	if desc {
		head |= cursorDescending
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != 1+len(key{}) || b[0] != head {
		return from, fmt.Errorf("page token %q was not issued by this listing: %w", s, broker.ErrInvalidArgument)
	}
	copy(from[:], b[1:])
	return from, nil
}
