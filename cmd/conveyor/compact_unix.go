//go:build unix

package main

import (
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
