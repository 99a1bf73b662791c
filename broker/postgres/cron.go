package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/conveyor-dev/conveyor/broker"
)

// Cron entries live in conveyor_crons. A fire and its task's insert share
// one transaction, under the entry's row lock: after a crash either both
// are there or neither is, and the fire time on the entry refuses the
// fire a second time.

const cronColumns = `id, spec, queue, type, payload, content_type, metadata, options, paused, next_run, last_run,
	last_fire, last_task_id, last_error`

func scanCron(row pgx.Row) (broker.CronEntry, error) {
	var c broker.CronEntry
	var meta []byte
	var next, lastRun, lastFire int64
	err := row.Scan(&c.ID, &c.Spec, &c.Queue, &c.Type, &c.Payload, &c.ContentType, &meta, &c.Options, &c.Paused,
		&next, &lastRun, &lastFire, &c.LastTaskID, &c.LastError)
	if err != nil {
		return c, err
	}
	if len(meta) > 0 {
		if err := json.Unmarshal(meta, &c.Metadata); err != nil {
			return c, err
		}
	}
	if len(c.Options) == 0 {
		c.Options = nil
	}
	c.NextRun, c.LastRun, c.LastFire = fromNanos(next), fromNanos(lastRun), fromNanos(lastFire)
	return c, nil
}

func cronMetadata(c broker.CronEntry) *string {
	if len(c.Metadata) == 0 {
		return nil
	}
	b, _ := json.Marshal(c.Metadata) // a map of strings always encodes
	s := string(b)
	return &s
}

// CreateCron stores a new entry; see broker.Broker.
func (e *Engine) CreateCron(ctx context.Context, c broker.CronEntry) (broker.CronEntry, error) {
	if err := storable(c.Type, c.ContentType, "", "", "", c.Metadata); err != nil {
		return broker.CronEntry{}, err
	}
	var out broker.CronEntry
	err := e.inTx(ctx, func(t *txn) error {
		row := t.queryRow(ctx, `INSERT INTO conveyor_crons (id, spec, queue, type, payload, content_type, metadata, options,
			paused, next_run) VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8, $9, $10)
			ON CONFLICT (id) DO NOTHING RETURNING `+cronColumns,
			c.ID, c.Spec, c.Queue, c.Type, nonNil(c.Payload), c.ContentType, cronMetadata(c), c.Options, c.Paused, nanos(c.NextRun))
		var err error
		out, err = scanCron(row)
		if isNoRows(err) {
			return fmt.Errorf("cron entry %q: %w", c.ID, broker.ErrAlreadyExists)
		}
		t.cronsChanged = err == nil
		return err
	})
	return out, err
}

// UpdateCron changes an entry in one step; see broker.Broker.
func (e *Engine) UpdateCron(ctx context.Context, id string, update func(broker.CronEntry) (broker.CronEntry, error)) (broker.CronEntry, error) {
	var out broker.CronEntry
	err := e.inTx(ctx, func(t *txn) error {
		old, err := scanCron(t.queryRow(ctx, `SELECT `+cronColumns+` FROM conveyor_crons WHERE id = $1 FOR UPDATE`, id))
		if isNoRows(err) {
			return fmt.Errorf("cron entry %q: %w", id, broker.ErrNotFound)
		}
		if err != nil {
			return err
		}
		c, err := update(old)
		if err != nil {
			return err
		}
		if err := storable(c.Type, c.ContentType, "", "", "", c.Metadata); err != nil {
			return err
		}
		out, err = scanCron(t.queryRow(ctx, `UPDATE conveyor_crons SET spec = $2, queue = $3, type = $4, payload = $5,
			content_type = $6, metadata = $7::jsonb, options = $8, paused = $9, next_run = $10
			WHERE id = $1 RETURNING `+cronColumns,
			id, c.Spec, c.Queue, c.Type, nonNil(c.Payload), c.ContentType, cronMetadata(c), c.Options, c.Paused, nanos(c.NextRun)))
		t.cronsChanged = err == nil
		return err
	})
	return out, err
}

// Cron returns an entry; see broker.Broker.
func (e *Engine) Cron(ctx context.Context, id string) (broker.CronEntry, error) {
	if err := e.checkOpen(); err != nil {
		return broker.CronEntry{}, err
	}
	c, err := scanCron(e.pool.QueryRow(ctx, `SELECT `+cronColumns+` FROM conveyor_crons WHERE id = $1`, id))
	if isNoRows(err) {
		return c, fmt.Errorf("cron entry %q: %w", id, broker.ErrNotFound)
	}
	return c, e.storageError(err)
}

// Crons lists the entries; see broker.Broker.
func (e *Engine) Crons(ctx context.Context) ([]broker.CronEntry, error) {
	if err := e.checkOpen(); err != nil {
		return nil, err
	}
	rows, err := e.pool.Query(ctx, `SELECT `+cronColumns+` FROM conveyor_crons ORDER BY id`)
	if err != nil {
		return nil, e.storageError(err)
	}
	defer rows.Close()
	var out []broker.CronEntry
	for rows.Next() {
		c, err := scanCron(rows)
		if err != nil {
			return nil, e.storageError(err)
		}
		out = append(out, c)
	}
	return out, e.storageError(rows.Err())
}

// DeleteCron removes an entry; see broker.Broker.
func (e *Engine) DeleteCron(ctx context.Context, id string) error {
	return e.inTx(ctx, func(t *txn) error {
		tag, err := t.exec(ctx, `DELETE FROM conveyor_crons WHERE id = $1`, id)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("cron entry %q: %w", id, broker.ErrNotFound)
		}
		t.cronsChanged = true
		return nil
	})
}

// cronTemplateIs says whether stored entry s has c's spec and task
// template.
func cronTemplateIs(s, c *broker.CronEntry) bool {
	return s.Spec == c.Spec && s.Queue == c.Queue && s.Type == c.Type && bytes.Equal(s.Payload, c.Payload) &&
		s.ContentType == c.ContentType && maps.Equal(s.Metadata, c.Metadata) && bytes.Equal(s.Options, c.Options)
}

// FireCron applies a scheduled fire; see broker.Broker.
func (e *Engine) FireCron(ctx context.Context, f broker.CronFire) (*broker.Task, error) {
	var task *broker.Task
	var taskErr error
	err := e.inTx(ctx, func(t *txn) error {
		task, taskErr = nil, nil
		old, err := scanCron(t.queryRow(ctx, `SELECT `+cronColumns+` FROM conveyor_crons WHERE id = $1 FOR UPDATE`, f.ID))
		switch {
		case isNoRows(err):
			return fmt.Errorf("cron entry %q: %w", f.ID, broker.ErrNotFound)
		case err != nil:
			return err
		case old.Paused:
			return fmt.Errorf("cron entry %q is paused: %w", f.ID, broker.ErrInvalidState)
		case nanos(old.NextRun) != nanos(f.FireAt) || !f.Skip && nanos(old.LastFire) >= nanos(f.FireAt),
			f.Entry != nil && !cronTemplateIs(&old, f.Entry):
			return fmt.Errorf("cron entry %q at %s: %w", f.ID, f.FireAt.UTC().Format(time.RFC3339), broker.ErrAlreadyFired)
		}
		lastFire, lastRun, lastTask, lastErr := max(nanos(old.LastFire), nanos(f.FireAt)), nanos(old.LastRun), old.LastTaskID, old.LastError
		if !f.Skip {
			now := nanos(f.Now)
			items := t.e.prepare([]broker.NewTask{f.Task}, now)
			if err := t.insertItems(ctx, items, now, false); err != nil {
				return err
			}
			it := &items[0]
			lastRun = now
			switch {
			case it.err != nil:
				taskErr = it.err
			case it.existed:
				taskErr = fmt.Errorf("task %s: %w", it.id, broker.ErrAlreadyExists)
			default:
				task, lastTask = it.view(now), it.id
			}
			lastErr = ""
			if taskErr != nil {
				lastErr = taskErr.Error()
			}
		}
		_, err = t.exec(ctx, `UPDATE conveyor_crons SET last_fire = $2, next_run = $3, last_run = $4, last_task_id = $5,
			last_error = $6 WHERE id = $1`, f.ID, lastFire, nanos(f.Next), lastRun, lastTask, lastErr)
		return err
	})
	if err != nil {
		return nil, err
	}
	return task, taskErr
}
