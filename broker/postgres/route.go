package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/conveyor-dev/conveyor/broker"
)

// This file is how a lease's route (broker.Route) reads a queue's ready
// line. Each kind of route walks the index that holds what it may take,
// so that it does not read the tasks it must pass over:
//   - an open route (every type, at-most-once tasks too) walks
//     conveyor_tasks_ready from its scan floors, as every lease did before
//     routing existed, and raises the floors;
//   - the zero route (every type, no at-most-once task: older workers,
//     push endpoints) walks conveyor_tasks_ready_plain, the line without
//     the at-most-once tasks, from floors of its own (plain floors), and
//     raises them;
//   - a route naming a few types reads one branch per type (and per
//     at-most-once-ness it may take) of conveyor_tasks_ready_type, each in
//     the line's order, and merges them;
//   - any other (types excepted, or more types than maxTypeBranches) walks
//     the line from the floors with the types as a filter, raising none
//     (it passes tasks over below what it takes).
//
// A typed walk locks, in each branch, the rows it may take before the
// merge picks among them: up to n per branch, released at the commit.
// Another lease meanwhile passes them over (SKIP LOCKED) and may come back
// short, as it may when a stale Result's check holds a row: the short
// lease's look (recheckLater) covers both.
//
// A typed walk goes by floors of its kinds (scanfloor.go): each branch
// from its kind's floors, one index range per priority, then, when that
// came out short, each from its start. The engine counts ready tasks by
// queue, not by type, so a typed walk also comes out short whenever its
// types have fewer tasks ready than the queue: a lease of a line its types
// share with tasks it does not take reads from the start once its own run
// dry, past the index entries of the tasks leased since VACUUM last ran
// (and, while a transaction holds an old snapshot, every one since it
// began). A line of the walk's types alone comes out short only for a
// task left below the floors (scanfloor.go).

// maxTypeBranches bounds the types a typed walk reads a branch of each: a
// route naming more walks the line with a filter.
const maxTypeBranches = 8

// walkKind is how a lease reads the ready line.
type walkKind uint8

const (
	walkNone     walkKind = iota // the route takes no task
	walkOpen                     // every task: conveyor_tasks_ready
	walkPlain                    // every task but the at-most-once ones: conveyor_tasks_ready_plain
	walkFiltered                 // the line, with the types as a filter
	walkTyped                    // a branch per type: conveyor_tasks_ready_type
)

// routeWalk is how a lease routed by a broker.Route reads a ready line.
type routeWalk struct {
	kind walkKind
	// atMostOnce: the walk may take at-most-once tasks.
	atMostOnce bool
	// types, when not nil, are the only types the walk takes (sorted,
	// none of the route's Except); except are the types a filtered walk
	// of every other type passes over.
	types, except []string
}

// walkOf is the walk of a lease routed by r; it takes what r.Takes
// allows.
func walkOf(r broker.Route) routeWalk {
	r = storableRoute(r)
	w := routeWalk{atMostOnce: r.StartAuthorization}
	switch {
	case r.Open():
		w.kind = walkOpen
	case r.Types == nil && len(r.Except) == 0:
		w.kind = walkPlain
	case r.Types == nil:
		w.kind, w.except = walkFiltered, sortedSet(r.Except)
	default:
		w.types = slices.DeleteFunc(sortedSet(r.Types), func(typ string) bool { return slices.Contains(r.Except, typ) })
		switch {
		case len(w.types) == 0:
			w.kind = walkNone
		case len(w.types) <= maxTypeBranches:
			w.kind = walkTyped
		default:
			w.kind = walkFiltered
		}
	}
	return w
}

// storableRoute is r without the types no task of this engine can have
// (one with a NUL: storable refuses it), which a worker may still name:
// as a statement's argument they would fail it.
func storableRoute(r broker.Route) broker.Route {
	hasNUL := func(typ string) bool { return strings.IndexByte(typ, 0) >= 0 }
	if slices.ContainsFunc(r.Types, hasNUL) {
		r.Types = slices.DeleteFunc(slices.Clone(r.Types), hasNUL) // never nil: it takes none of them
	}
	if slices.ContainsFunc(r.Except, hasNUL) {
		r.Except = slices.DeleteFunc(slices.Clone(r.Except), hasNUL)
	}
	return r
}

// sortedSet is s sorted, each element once, never nil.
func sortedSet(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return append([]string{}, slices.Compact(out)...)
}

// takes reports whether the walk takes a task of type typ, at most once
// or not (broker.Route.Takes is its oracle).
func (w routeWalk) takes(typ string, atMostOnce bool) bool {
	switch {
	case w.kind == walkNone, atMostOnce && !w.atMostOnce:
		return false
	case w.types != nil:
		return slices.Contains(w.types, typ)
	}
	return !slices.Contains(w.except, typ)
}

// plainFloors reports whether the walk goes by the plain floors (those of
// the line without the at-most-once tasks) rather than the queue's.
func (w routeWalk) plainFloors() bool { return !w.atMostOnce }

// raises reports whether the walk raises the floors it goes by: it takes
// every task of its line in order, passing none over.
func (w routeWalk) raises() bool { return w.kind == walkOpen || w.kind == walkPlain }

// Predicates of a line walk beyond the open one's.
const (
	notAtMostOnce = ` AND NOT at_most_once`
	onlyTypes     = ` AND type = ANY($9::text[])`
	exceptTypes   = ` AND type <> ALL($9::text[])`
)

// lineSQL is the statement that picks the rows of a line walk from the
// floors ($8, one per priority, highest first): the open walk's, with
// extra predicates.
func lineSQL(extra string) string {
	return `SELECT r.tid, r.started_at FROM unnest($8::int8[]) WITH ORDINALITY AS f(floor, i)
			CROSS JOIN LATERAL (
				SELECT ctid AS tid, started_at FROM conveyor_tasks
				WHERE queue = $1 AND priority = (` + maxPriorityText + ` + 1 - f.i)::smallint AND state = 2 AND NOT held
					AND ready_seq >= f.floor` + extra + `
				ORDER BY ready_seq LIMIT $2 FOR UPDATE SKIP LOCKED) r
			LIMIT $2`
}

// The line walks' statements.
var (
	openLineSQL         = lineSQL("")
	plainLineSQL        = lineSQL(notAtMostOnce)
	onlyTypesLineSQL    = lineSQL(onlyTypes)
	onlyPlainTypesSQL   = lineSQL(notAtMostOnce + onlyTypes)
	exceptTypesLineSQL  = lineSQL(exceptTypes)
	exceptPlainTypesSQL = lineSQL(notAtMostOnce + exceptTypes)
)

// typedSQLs holds the typed walks' statements made so far, by shape.
var typedSQLs struct {
	sync.Mutex
	m map[typedShape]string
}

// typedReady says that a task is ready as conveyor_tasks_ready_type's
// predicate does (the migration says why), for the statements that read
// it.
const typedReady = `state = 2 AND held IS NOT TRUE`

// typedShape is what a typed walk's statement depends on.
type typedShape struct {
	types      int
	atMostOnce bool
	// floored: each branch starts from its floors, one per priority
	// (after the types, one array per branch), as a line walk does.
	floored bool
}

// pick is the statement that picks the rows of the walk (tid,
// started_at), and its arguments from $8 on, given the floors for a line
// walk.
func (w routeWalk) pick(floors *scanFloors) (string, []any) {
	switch w.kind {
	case walkTyped:
		args := make([]any, len(w.types))
		for i, typ := range w.types {
			args[i] = typ
		}
		return typedSQL(typedShape{types: len(w.types), atMostOnce: w.atMostOnce}), args
	case walkFiltered:
		sql, set := exceptTypesLineSQL, w.except
		switch {
		case w.types != nil && w.atMostOnce:
			sql, set = onlyTypesLineSQL, w.types
		case w.types != nil:
			sql, set = onlyPlainTypesSQL, w.types
		case !w.atMostOnce:
			sql = exceptPlainTypesSQL
		}
		return sql, []any{floors.byPriority(), set}
	case walkPlain:
		return plainLineSQL, []any{floors.byPriority()}
	}
	return openLineSQL, []any{floors.byPriority()}
}

// kinds lists the kinds of a typed walk's branches, in the order of its
// statements' branches.
func (w routeWalk) kinds() []broker.Kind {
	out := make([]broker.Kind, 0, 2*len(w.types))
	for _, typ := range w.types {
		out = append(out, broker.Kind{Type: typ})
		if w.atMostOnce {
			out = append(out, broker.Kind{Type: typ, AtMostOnce: true})
		}
	}
	return out
}

// pickFloored is the statement of a typed walk from its kinds' floors
// (one set per branch, in kinds' order), and its arguments from $8 on:
// the types, then each branch's floors.
func (w routeWalk) pickFloored(floors []scanFloors) (string, []any) {
	args := make([]any, 0, len(w.types)+len(floors))
	for _, typ := range w.types {
		args = append(args, typ)
	}
	for i := range floors {
		args = append(args, floors[i].byPriority())
	}
	return typedSQL(typedShape{types: len(w.types), atMostOnce: w.atMostOnce, floored: true}), args
}

// typedSQL is the statement of a typed walk of s's shape: one branch per
// type ($8 on) and at-most-once-ness, each the first $2 rows of its part
// of conveyor_tasks_ready_type in the line's order (priority, then FIFO),
// locked; the merge keeps the first $2 of them.
func typedSQL(s typedShape) string {
	typedSQLs.Lock()
	defer typedSQLs.Unlock()
	if sql, ok := typedSQLs.m[s]; ok {
		return sql
	}
	var b strings.Builder
	b.WriteString(`SELECT tid, started_at FROM (`)
	branch := 0
	for i := range s.types {
		for _, amo := range []bool{false, true} {
			if amo && !s.atMostOnce {
				continue
			}
			if branch > 0 {
				b.WriteString(`
				UNION ALL `)
			}
			if s.floored {
				fmt.Fprintf(&b, `SELECT * FROM (SELECT r.* FROM unnest($%d::int8[]) WITH ORDINALITY AS f(floor, i)
					CROSS JOIN LATERAL (
						SELECT ctid AS tid, started_at, priority, ready_seq FROM conveyor_tasks
						WHERE queue = $1 AND type = $%d AND at_most_once = %t AND `+typedReady+`
							AND priority = (`+maxPriorityText+` + 1 - f.i)::smallint AND ready_seq >= f.floor
						ORDER BY ready_seq LIMIT $2 FOR UPDATE SKIP LOCKED) r
					LIMIT $2) b%d`, 8+s.types+branch, 8+i, amo, branch)
			} else {
				fmt.Fprintf(&b, `SELECT * FROM (SELECT ctid AS tid, started_at, priority, ready_seq FROM conveyor_tasks
					WHERE queue = $1 AND type = $%d AND at_most_once = %t AND `+typedReady+`
					ORDER BY priority DESC, ready_seq LIMIT $2 FOR UPDATE SKIP LOCKED) b%d`, 8+i, amo, branch)
			}
			branch++
		}
	}
	b.WriteString(`) u ORDER BY priority DESC, ready_seq LIMIT $2`)
	if typedSQLs.m == nil {
		typedSQLs.m = map[typedShape]string{}
	}
	typedSQLs.m[s] = b.String()
	return typedSQLs.m[s]
}

// moreReady reports whether queue's ready line still holds a task the
// walk takes, after the walk came back short: one it passed over because
// another transaction had it locked. A typed or plain walk looks (by its
// own index); a walk with types excepted does not (the tasks it passes
// over could be many), and counts its short leases as routing's.
func (t *txn) moreReady(ctx context.Context, queue string, w routeWalk) (bool, error) {
	var sql string
	args := []any{queue}
	switch {
	case w.types != nil:
		sql, args = `SELECT EXISTS (SELECT FROM conveyor_tasks WHERE queue = $1 AND type = ANY($2::text[])
			AND `+typedReady, append(args, w.types)
		if !w.atMostOnce {
			sql += notAtMostOnce
		}
		sql += `)`
	case w.kind == walkPlain:
		// In the line's order, so that the planner reads the line's index
		// (EXISTS would drop the order, and might read the table).
		sql = `SELECT count(*) > 0 FROM (SELECT FROM conveyor_tasks WHERE queue = $1 AND state = 2 AND NOT held
			AND NOT at_most_once ORDER BY priority DESC, ready_seq LIMIT 1) x`
	default:
		return false, nil
	}
	var more bool
	err := t.queryRow(ctx, sql, args...).Scan(&more)
	return more, err
}
