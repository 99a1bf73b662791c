//go:build unix

package main

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// copyOwner gives path the owner and group of the file old describes: an
// operator who compacts as root must not leave a file the server's user
// cannot open.
func copyOwner(old os.FileInfo, path string) error {
	st, ok := old.Sys().(*syscall.Stat_t)
	if !ok || (int(st.Uid) == os.Getuid() && int(st.Gid) == os.Getgid()) {
		return nil
	}
	if err := os.Chown(path, int(st.Uid), int(st.Gid)); err != nil {
		return fmt.Errorf("give the compacted file the old one's owner: %w", err)
	}
	return nil
}

// dirLocked says lockDir's lock excludes other compacts.
const dirLocked = true

// lockDir takes an exclusive lock on the data directory for one compact,
// and returns its release. The data file's own lock cannot serve: compact
// opens the file read-only, which shares its lock, so two compacts of one
// directory would both run, and the second's rename could replace a file
// a server started on after the first.
func lockDir(dir string) (func(), error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("compact: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("another conveyor compact is running on %s: wait for it to end", dir)
		}
		return nil, fmt.Errorf("compact: lock %s: %w", dir, err)
	}
	return func() { _ = f.Close() }, nil
}
