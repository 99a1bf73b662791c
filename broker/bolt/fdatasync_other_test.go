//go:build !linux

package bolt_test

import "os"

func fdatasync(f *os.File) error { return f.Sync() }
