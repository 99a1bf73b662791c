//go:build !unix

package main

// childMain: no test runs a child process here.
func childMain() bool { return false }
