package main

import (
	"fmt"

	bbolt "go.etcd.io/bbolt"
)

// A damaged data file does not make bbolt return an error: a page that
// fails its checks makes it panic, and a page past the end of a truncated
// file (a copy cut short by a full disk) makes the process fault. compact
// turns both into an error that says so, so that it exits 1 with a message
// and removes its partial copy, instead of crashing with a stack trace and
// leaving the copy behind.

// checkLength refuses a file shorter than its last commit says it is:
// reading its last pages would fault.
func checkLength(db *bbolt.DB, size int64) error {
	var need int64
	if err := db.View(func(tx *bbolt.Tx) error { need = tx.Size(); return nil }); err != nil {
		return err
	}
	if size < need {
		return fmt.Errorf("%s is truncated: %d bytes, and its last commit needs %d: restore it from a backup", db.Path(), size, need)
	}
	return nil
}
