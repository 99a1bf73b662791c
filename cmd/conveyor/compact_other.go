//go:build !unix

package main

import "os"

// copyOwner has nothing to copy where files have no unix owner.
func copyOwner(os.FileInfo, string) error { return nil }

// dirLocked is false: without a lock, a copy in the directory may be
// another compact's, running, so none is removed as stale.
const dirLocked = false

// lockDir has no lock to take where flock is missing: two compacts of one
// directory must not be run at once there.
func lockDir(string) (func(), error) { return func() {}, nil }
