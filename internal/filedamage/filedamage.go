// Package filedamage damages data files the way disks and stray writes do,
// for the tests of what the engine and the CLI make of a damaged file.
package filedamage

import (
	"bytes"
	"os"
	"testing"
)

// OverwritePages fills every page of the file at path but its first two
// (bbolt's meta pages) with 0xff: the meta pages still check, so bbolt
// opens the file, and every other page fails bbolt's checks.
func OverwritePages(t *testing.T, path string) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	meta := 2 * int64(os.Getpagesize())
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(bytes.Repeat([]byte{0xff}, int(fi.Size()-meta)), meta); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
