package main

import (
	"fmt"
	"os"
	"path/filepath"
)

// The backup and compact commands replace files so that a crash at any
// moment leaves either the old file or the complete new one: write a
// temporary file beside the target, fsync it, rename it over the target,
// fsync the directory (which makes the rename itself durable).

// syncFile flushes f's data to disk and closes it.
func syncFile(f *os.File) error {
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("fsync %s: %w", f.Name(), err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", f.Name(), err)
	}
	return nil
}

// syncDir makes the entries of path's directory (a rename into it) durable.
func syncDir(path string) error {
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		_ = d.Close()
		return fmt.Errorf("fsync %s: %w", d.Name(), err)
	}
	return d.Close()
}
