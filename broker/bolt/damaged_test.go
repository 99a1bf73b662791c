package bolt_test

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bbolt "go.etcd.io/bbolt"

	"github.com/conveyor-dev/conveyor/broker/bolt"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
	"github.com/conveyor-dev/conveyor/internal/filedamage"
)

// TestOpenDamagedFile: a damaged file (pages overwritten, a record that
// points outside the file, or the file cut short as a copy on a full disk
// leaves it) fails Open with an error that names the
// file and says to restore a backup, rather than crashing the process
// with bbolt's panic or a SIGBUS.
func TestOpenDamagedFile(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, path string)
	}{
		{"overwritten", filedamage.OverwritePages},
		{"live page overwritten", overwriteLiveRoot},
		{"live record elsewhere", pointLiveRecordAway},
		{"truncated", func(t *testing.T, path string) {
			if err := os.Truncate(path, 4*int64(os.Getpagesize())); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "conveyor.db")
			e, err := bolt.Open(bolt.Config{Path: path})
			if err != nil {
				t.Fatal(err)
			}
			for range 300 { // enough that each bucket has pages of its own
				task := bt.NewTask("q")
				task.Payload = bytes.Repeat([]byte("x"), 1<<10)
				bt.EnqueueOne(t, e, bt.T0, task)
			}
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			tc.damage(t, path)
			_, err = bolt.Open(bolt.Config{Path: path})
			if err == nil || !strings.Contains(err.Error(), path+" is damaged") || !strings.Contains(err.Error(), "restore it from a backup") {
				t.Fatalf("Open of a damaged file: %v, want it named as damaged", err)
			}
		})
	}
}

// overwriteLiveRoot fills the root page of the live bucket with 0xff: the
// engine's first read of it (under Open, on its own goroutine) fails
// bbolt's checks.
func overwriteLiveRoot(t *testing.T, path string) {
	t.Helper()
	b, root := readWithLiveRoot(t, path)
	copy(root, bytes.Repeat([]byte{0xff}, len(root)))
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// pointLiveRecordAway points the first live record's key far past the end
// of the file, so that the pages bbolt checks at open all pass and only
// reading the record faults: that read is the engine's live scan, on a
// goroutine of its own.
func pointLiveRecordAway(t *testing.T, path string) {
	t.Helper()
	b, p := readWithLiveRoot(t, path)
	// A page: id (8 bytes), flags (2), count (2), overflow (4), then its
	// elements; a branch element (16 bytes) ends with its child's id, a
	// leaf element's second word is its key's offset from the element.
	const branch, header = 0x01, 16
	size := uint64(len(p))
	for binary.LittleEndian.Uint16(p[8:]) == branch {
		child := binary.LittleEndian.Uint64(p[header+8:])
		p = b[child*size : (child+1)*size]
	}
	binary.LittleEndian.PutUint32(p[header+4:], 256<<20)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// readWithLiveRoot reads the file at path, and returns it and the root
// page of its live bucket (a slice of it).
func readWithLiveRoot(t *testing.T, path string) (file, root []byte) {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	var pgid uint64
	err = db.View(func(tx *bbolt.Tx) error { pgid = uint64(tx.Bucket([]byte("live")).Root()); return nil })
	size := uint64(db.Info().PageSize)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if file, err = os.ReadFile(path); err != nil {
		t.Fatal(err)
	}
	return file, file[pgid*size : (pgid+1)*size]
}
