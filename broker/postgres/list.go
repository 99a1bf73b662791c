package postgres

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
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
// is one statement over the (queue, state, id) index: in id order (or its
// reverse), from the cursor on.
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
	// The type is a filter too: an index per type would be one more for
	// every state change of every task to maintain.
	filtered := p.Search != "" || p.Group != "" || p.Type != ""
	window := limit + 1
	if filtered {
		window = max(listMaxExamined, limit+1)
	}
	// The window is the next tasks of the listing's state(s) in order; the
	// filters (type, search, group) are applied within it, so one call
	// examines a bounded number of tasks whatever it matches.
	sql := `WITH w AS (` + listWindow(p.State, dir, cmp, "$4") + `)
		SELECT ` + cols + `, w.id FROM w JOIN conveyor_tasks t ON t.id = w.id
		WHERE ($5 = '' OR t.type = $5) AND ($6 = '' OR t.group_key = $6) AND ($7 = '' OR strpos(t.id, $7) > 0
			OR position(convert_to($7, 'UTF8') IN t.payload) > 0
			OR EXISTS (SELECT 1 FROM jsonb_each_text(t.metadata) m WHERE strpos(m.value, $7) > 0))
		ORDER BY w.id ` + dir + ` LIMIT $8`
	rows, err := e.pool.Query(ctx, sql, p.Queue, int16(p.State), from, window, p.Type, p.Group, p.Search, limit+1)
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
		err := e.pool.QueryRow(ctx, `SELECT id FROM (`+listWindow(p.State, dir, cmp, "$4 + 1")+`) w
			ORDER BY id `+dir+` OFFSET $4 LIMIT 1`, p.Queue, int16(p.State), from, window).Scan(&more)
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

// listWindow is the SQL of a listing's window: the ids of queue $1's
// tasks in state $2 from id $3 on (cmp, in direction dir), at most limit
// of them, off the (queue, state, id) index. A listing of every state
// merges one such range per state ($2 unused but for its type): the
// tasks of a queue in id order whatever their state would need an index
// of their own, one more to maintain on every insert and state change.
func listWindow(state broker.State, dir, cmp, limit string) string {
	one := func(st string) string {
		return `SELECT id FROM conveyor_tasks WHERE queue = $1 AND state = ` + st + ` AND id ` + cmp + ` $3
			ORDER BY id ` + dir + ` LIMIT ` + limit
	}
	if state != broker.StateUnspecified {
		return one("$2")
	}
	parts := make([]string, 0, broker.NumStates)
	for s := broker.StateScheduled; s < broker.NumStates; s++ {
		parts = append(parts, "("+one(strconv.Itoa(int(s)))+")")
	}
	return `SELECT id FROM (` + strings.Join(parts, " UNION ALL ") + `) u WHERE $2::smallint = 0
		ORDER BY id ` + dir + ` LIMIT ` + limit
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
