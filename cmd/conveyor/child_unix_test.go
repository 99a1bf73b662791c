//go:build unix

package main

// childMain runs the child process a test asked for, if any, and reports
// whether it did.
func childMain() bool { return runCompactChild() || runBackupChild() }
