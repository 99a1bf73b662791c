package bolt

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	bbolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/conveyor-dev/conveyor/broker"
)

// This file opens a data file for conveyor copy (broker.CopySource and
// broker.CopyTarget): copyout.go reads one whole, copyin.go writes one.
//
// A source is opened read-only, under a shared lock: a server holds the
// file's lock exclusively as long as it runs, so a running server shows
// as the lock not coming, and a server cannot start while the copy reads.
// A destination is written into a new file beside the data file, while
// the copy holds the data file's own lock (creating it, empty, if there
// is none), so that no server starts on the directory meanwhile; Commit
// checks the new file, makes it durable and renames it over the data
// file, as conveyor compact does. A copy that fails or is interrupted
// leaves the directory as it found it.

// CopyStore is a data file opened for a copy; see OpenCopySource and
// OpenCopyTarget.
type CopyStore struct {
	path string
	// db is the file read (a source) or the new file written (a target).
	db *bbolt.DB
	// A target's: lock holds the data file's lock until the new file,
	// tmp, replaces it; created says the copy created the data file,
	// createdDir its directory (Close without Commit removes them again).
	lock       *bbolt.DB
	tmp        string
	created    bool
	createdDir string
	// What a target was given, for Seal: the queues, and the terminal
	// tasks per queue and retention class.
	queues   []broker.QueueInfo
	terminal map[string]*[3]int64
	named    map[string]struct{} // the queues the tasks name
	lastKey  key
	done     bool
}

// copyLockTimeout is how long a copy waits for a data file's lock. A
// server holds it as long as it runs, so waiting longer does not help.
const copyLockTimeout = time.Second

var (
	_ broker.CopySource = (*CopyStore)(nil)
	_ broker.CopyTarget = (*CopyStore)(nil)
)

// OpenCopySource opens the data file at path, read-only, to copy what it
// holds. A file a server has open is refused (broker.ErrStoreInUse); so is
// a file of another schema version than this build's.
func OpenCopySource(path string) (*CopyStore, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("source: %w", err)
	}
	db, err := openLocked(path, &bbolt.Options{ReadOnly: true, Timeout: copyLockTimeout})
	if err != nil {
		return nil, err
	}
	s := &CopyStore{path: path, db: db}
	if err := ReadGuarded(path, s.checkSchema); err != nil {
		_ = db.Close()
		return nil, err
	}
	return s, nil
}

// OpenCopyTarget opens the data file at path (its directory created if
// missing) as a copy's destination. It must be empty, holding no task,
// queue or cron entry (broker.ErrStoreNotEmpty, saying what it holds), and
// no server may have it open (broker.ErrStoreInUse). Files left by copies
// that were killed midway are removed.
func OpenCopyTarget(path string) (*CopyStore, error) {
	dir := filepath.Dir(path)
	s := &CopyStore{path: path, terminal: map[string]*[3]int64{}, named: map[string]struct{}{}}
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		s.createdDir = dir
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	_, err := os.Stat(path)
	s.created = errors.Is(err, os.ErrNotExist)
	if s.lock, err = openLocked(path, &bbolt.Options{Timeout: copyLockTimeout, FreelistType: bbolt.FreelistMapType}); err != nil {
		return nil, err
	}
	if err := s.open(); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// open checks that the data file is empty and creates the new file, with
// the buckets and schema version of an engine's.
func (s *CopyStore) open() error {
	if err := ReadGuarded(s.path, s.checkEmpty); err != nil {
		return err
	}
	base := filepath.Base(s.path)
	stale, err := filepath.Glob(filepath.Join(filepath.Dir(s.path), base+".copy-*"))
	if err != nil {
		return err
	}
	for _, f := range stale { // the lock is held: no copy is writing it
		if err := os.Remove(f); err != nil {
			return fmt.Errorf("remove the file an interrupted copy left: %w", err)
		}
	}
	f, err := os.CreateTemp(filepath.Dir(s.path), base+".copy-*")
	if err != nil {
		return err
	}
	s.tmp = f.Name()
	_ = f.Close()
	// NoSync: the copy commits once per batch, and only the whole file
	// matters; Commit syncs it once. The freelist type is the engine's.
	s.db, err = bbolt.Open(s.tmp, 0o600, &bbolt.Options{NoSync: true, FreelistType: bbolt.FreelistMapType,
		InitialMmapSize: 1 << 30})
	if err != nil {
		return fmt.Errorf("create %s: %w", s.tmp, err)
	}
	return s.db.Update(func(tx *bbolt.Tx) error {
		for _, name := range allBuckets {
			if _, err := tx.CreateBucket(name); err != nil {
				return fmt.Errorf("create bucket %s: %w", name, err)
			}
		}
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], schemaVersion)
		return tx.Bucket(bucketMeta).Put(keySchema, b[:])
	})
}

// openLocked opens the bbolt file at path with its lock, or fails with
// broker.ErrStoreInUse when the lock does not come.
func openLocked(path string, o *bbolt.Options) (*bbolt.DB, error) {
	var db *bbolt.DB
	err := ReadGuarded(path, func() (err error) {
		db, err = bbolt.Open(path, 0o600, o)
		return err
	})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("%s: %w, by a running server most likely: stop it first", path, broker.ErrStoreInUse)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return db, nil
}

// checkSchema refuses a source file this build does not read as it is.
func (s *CopyStore) checkSchema() error {
	return s.db.View(func(tx *bbolt.Tx) error {
		mb := tx.Bucket(bucketMeta)
		if mb == nil {
			return nil // a file no engine wrote to: nothing to copy
		}
		switch v := mb.Get(keySchema); {
		case len(v) != 8:
			return fmt.Errorf("%s: the schema version record is %d bytes, want 8", s.path, len(v))
		case binary.BigEndian.Uint64(v) == 1:
			return fmt.Errorf("%s has schema version 1: open it once with this version's server (it migrates the file on start), stop the server, then copy", s.path)
		case binary.BigEndian.Uint64(v) != schemaVersion:
			return fmt.Errorf("%s has schema version %d; this build reads version %d", s.path, binary.BigEndian.Uint64(v), schemaVersion)
		}
		return nil
	})
}

// checkEmpty refuses a destination that holds tasks, queues or cron
// entries, saying how many.
func (s *CopyStore) checkEmpty() error {
	return s.lock.View(func(tx *bbolt.Tx) error {
		count := func(name []byte) int {
			if b := tx.Bucket(name); b != nil {
				return b.Stats().KeyN
			}
			return 0
		}
		tasks, queues, crons := count(bucketTasks), count(bucketQueues), count(bucketCron)
		if tasks+queues+crons == 0 {
			return nil
		}
		return fmt.Errorf("%w: %s holds %s: copy into an empty data directory, or move that file away first",
			broker.ErrStoreNotEmpty, s.path, holding(tasks, queues, crons))
	})
}

// holding says what a store holds, as "3 tasks, 1 queue and 2 cron entries".
func holding(tasks, queues, crons int) string {
	var parts []string
	add := func(n int, one, many string) {
		if n == 1 {
			parts = append(parts, "1 "+one)
		} else if n > 1 {
			parts = append(parts, fmt.Sprintf("%d %s", n, many))
		}
	}
	add(tasks, "task", "tasks")
	add(queues, "queue", "queues")
	add(crons, "cron entry", "cron entries")
	if len(parts) > 1 {
		return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
	}
	return strings.Join(parts, "")
}

// Commit checks the new file with bbolt's consistency check, makes it
// durable and renames it over the data file.
func (s *CopyStore) Commit(context.Context) error {
	if s.lock == nil || s.done {
		return errors.New("bolt: Commit of a store not opened as a copy's destination")
	}
	if err := s.db.View(func(tx *bbolt.Tx) error {
		var first error
		for err := range tx.Check() { // every error read: the checker blocks until it is
			if first == nil {
				first = err
			}
		}
		return first
	}); err != nil {
		return fmt.Errorf("the copy fails bbolt's check: %w", err)
	}
	if err := s.db.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", s.tmp, err)
	}
	if err := s.db.Close(); err != nil {
		return err
	}
	s.db = nil
	if err := os.Rename(s.tmp, s.path); err != nil {
		return err
	}
	s.done = true
	if err := syncParent(s.path); err != nil {
		return err
	}
	return nil
}

// syncParent makes a rename in path's directory durable.
func syncParent(path string) error {
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer func() { _ = d.Close() }()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", filepath.Dir(path), err)
	}
	return nil
}

// Close releases the file. A destination not committed is left as the
// copy found it: the new file is removed, and so is the data file the
// copy created.
func (s *CopyStore) Close() error {
	var err error
	if s.db != nil {
		err = s.db.Close()
		s.db = nil
	}
	if s.lock == nil {
		return err
	}
	if !s.done {
		if s.tmp != "" {
			err = errors.Join(err, os.Remove(s.tmp))
		}
		if s.created {
			err = errors.Join(err, os.Remove(s.path))
		}
	}
	err = errors.Join(err, s.lock.Close())
	if !s.done && s.createdDir != "" {
		_ = os.Remove(s.createdDir) // only if empty: best effort
	}
	s.lock, s.done = nil, true
	return err
}
