package bolt

import (
	"fmt"
	"runtime/debug"
)

// A damaged file does not make bbolt return an error: a page that fails
// its checks makes it panic, and a page past the end of a truncated file
// (a copy cut short by a full disk, say a restore's) makes the process
// fault with SIGBUS, which Go cannot recover unless it is told to. Open
// reads the whole file's live part once, so it is where damage shows:
// ReadGuarded turns both into an error naming the file, so that the server
// exits with a message saying what to do rather than a stack trace.
//
// A panic or fault there leaves what bbolt held (the file descriptor and
// its lock, the mapping) to the process's exit: Open failing is fatal to
// the server.

// ReadGuarded runs read, which reads the bbolt file at path on the calling
// goroutine, and returns the panic or fault a damaged page causes as an
// error that names the file (conveyor compact reads through it too).
func ReadGuarded(path string, read func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = damaged(path, r)
		}
	}()
	return read()
}

// damaged is the error of a read of the file at path that panicked with r.
func damaged(path string, r any) error {
	if f, fault := r.(interface{ Addr() uintptr }); fault {
		return fmt.Errorf("%s is damaged (reading a page faulted at %#x: the file is shorter than its pages say, or its pages point elsewhere): restore it from a backup", path, f.Addr())
	}
	// A panic that is no fault is most likely bbolt's page checks, but
	// could be a defect of the reader: the advice says how to tell.
	return fmt.Errorf("%s is damaged or unreadable (%v): conveyor compact checks it; restore it from a backup if it is damaged", path, r)
}
