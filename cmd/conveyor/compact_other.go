//go:build !unix

package main

import "os"

// copyOwner has nothing to copy where files have no unix owner.
func copyOwner(os.FileInfo, string) error { return nil }

// lockDir has no lock to take where flock is missing: two compacts of one
// directory must not be run at once there.
func lockDir(string) (func(), error) { return func() {}, nil }
