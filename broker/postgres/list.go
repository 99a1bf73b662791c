package postgres

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/conveyor-dev/conveyor/broker"
)

// Bounds of one ListTasks call, as on the embedded engine: a page stops
// early, with a cursor to go on, once it holds listMaxBytes of task bytes
// or has examined listMaxExamined tasks that a search (or a group filter)
// did not match.
const (
	listMaxBytes    = 4 << 20
	listMaxExamined = 10_000
)

// ListTasks returns a page of a queue's tasks; see broker.Broker. A page
// is one statement over the (queue, state, id) indexes: in id order (or
// its reverse), from the cursor on.
func (e *Engine) ListTasks(ctx context.Context, p broker.ListParams) (broker.ListPage, error) {
	if err := e.checkOpen(); err != nil {
		return broker.ListPage{}, err
	}
	from, err := decodeCursor(p.Cursor, p.State, p.Descending)
	if err != nil {
		return broker.ListPage{}, err
	}
	limit := max(p.Limit, 1)
	cols := taskColumns
	if p.Brief {
		cols = briefColumns
	}
	dir, cmp := "ASC", ">="
	if p.Descending {
		dir, cmp = "DESC", "<="
	}
	if from == "" && p.Descending {
		cmp = "<>" // no bound: every id
	}
	filtered := p.Search != "" || p.Group != ""
	window := limit + 1
	if filtered {
		window = max(listMaxExamined, limit+1)
	}
	// The window is the next tasks of the listing's state and type in
	// order; the filters (search, group) are applied within it, so one
	// call examines a bounded number of tasks whatever it matches.
	sql := `WITH w AS (
			SELECT id FROM conveyor_tasks WHERE queue = $1 AND ($2 = 0 OR state = $2) AND ($3 = '' OR type = $3)
				AND id ` + cmp + ` $4 ORDER BY id ` + dir + ` LIMIT $5)
		SELECT ` + cols + `, w.id FROM w JOIN conveyor_tasks t ON t.id = w.id
		WHERE ($6 = '' OR t.group_key = $6) AND ($7 = '' OR strpos(t.id, $7) > 0
			OR position(convert_to($7, 'UTF8') IN t.payload) > 0
			OR EXISTS (SELECT 1 FROM jsonb_each_text(t.metadata) m WHERE strpos(m.value, $7) > 0))
		ORDER BY w.id ` + dir + ` LIMIT $8`
	rows, err := e.pool.Query(ctx, sql, p.Queue, int16(p.State), p.Type, from, window, p.Group, p.Search, limit+1)
	if err != nil {
		return broker.ListPage{}, e.storageError(err)
	}
	page, next, err := collectPage(rows, limit)
	if err != nil {
		return broker.ListPage{}, e.storageError(err)
	}
	if next != "" {
		page.Next = encodeCursor(p.State, p.Descending, next)
	} else if filtered {
		// The window may have ended before the listing did: go on at the
		// first task it did not examine.
		var more string
		err := e.pool.QueryRow(ctx, `SELECT id FROM conveyor_tasks WHERE queue = $1 AND ($2 = 0 OR state = $2)
			AND ($3 = '' OR type = $3) AND id `+cmp+` $4 ORDER BY id `+dir+` OFFSET $5 LIMIT 1`,
			p.Queue, int16(p.State), p.Type, from, window).Scan(&more)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return broker.ListPage{}, e.storageError(err)
		}
		if more != "" {
			page.Next = encodeCursor(p.State, p.Descending, more)
		}
	}
	if err := fillDeps(ctx, e.pool, page.Tasks, false); err != nil {
		return broker.ListPage{}, e.storageError(err)
	}
	return page, nil
}

// collectPage reads up to limit tasks; one more, or the byte bound, makes
// next the id of the first task left out.
func collectPage(rows pgx.Rows, limit int) (page broker.ListPage, next string, err error) {
	defer rows.Close()
	bytes := 0
	for rows.Next() {
		var id string
		task, err := scanTaskWith(rows, &id)
		if err != nil {
			return page, "", err
		}
		if len(page.Tasks) == limit || bytes >= listMaxBytes {
			next = id
			break
		}
		page.Tasks = append(page.Tasks, task)
		bytes += answerBytes(task)
	}
	return page, next, rows.Err()
}

// answerBytes is about what a task adds to a listing's answer.
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

// A cursor is "c", the listing's state (1 byte, 0 for every state, with
// cursorDescending set for a descending listing) and the id of the next
// task to examine, base64. A cursor of another listing's state or
// direction is refused: its position would mean nothing there.
const (
	cursorPrefix     = "c"
	cursorDescending = 0x80
)

func encodeCursor(state broker.State, desc bool, next string) string {
	return cursorPrefix + base64.RawURLEncoding.EncodeToString(append([]byte{cursorHead(state, desc)}, next...))
}

func cursorHead(state broker.State, desc bool) byte {
	if desc {
		return byte(state) | cursorDescending
	}
	return byte(state)
}

// decodeCursor returns the id a listing goes on from ("" to start).
func decodeCursor(s string, state broker.State, desc bool) (string, error) {
	if s == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(s, cursorPrefix))
	if err != nil || !strings.HasPrefix(s, cursorPrefix) || len(b) < 2 || b[0] != cursorHead(state, desc) {
		return "", fmt.Errorf("page token %q was not issued by this listing: %w", s, broker.ErrInvalidArgument)
	}
	return string(b[1:]), nil
}
