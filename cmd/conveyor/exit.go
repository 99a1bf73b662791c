package main

import (
	"errors"
	"fmt"

	"connectrpc.com/connect"
	"github.com/alecthomas/kong"
)

// Exit codes. They are part of the CLI's interface (docs/cli.md and the
// root --help list them): scripts branch on them, so a code never changes
// meaning.
const (
	exitOK          = 0
	exitFailure     = 1  // anything not listed below
	exitRefused     = 2  // the server refused the request as given
	exitNotFound    = 3  // a task, queue or cron entry named does not exist
	exitAuth        = 4  // the token is missing, wrong or not allowed
	exitUnavailable = 5  // the server cannot be reached or cannot serve now
	exitPartial     = 6  // a batch or bulk action failed for some of its tasks
	exitUsage       = 80 // kong's code for a command line it cannot parse
)

// exitCodes maps the connect codes a server answers with to exit codes:
// the one place where the two meet. Codes not listed exit with exitFailure.
var exitCodes = map[connect.Code]int{
	connect.CodeInvalidArgument:    exitRefused,
	connect.CodeFailedPrecondition: exitRefused,
	connect.CodeAlreadyExists:      exitRefused,
	connect.CodeNotFound:           exitNotFound,
	connect.CodeUnauthenticated:    exitAuth,
	connect.CodePermissionDenied:   exitAuth,
	connect.CodeUnavailable:        exitUnavailable,
}

// exitHelp is the exit-code table as the root --help shows it.
const exitHelp = `Exit codes:
  0   success
  1   any other failure
  2   the server refused the request (invalid_argument, failed_precondition, already_exists)
  3   not found
  4   unauthenticated or permission denied (check --token)
  5   the server is unavailable or cannot be reached (check --addr)
  6   a batch or bulk action failed for some tasks (the per-task results say which)
  80  usage error: the command line does not parse (kong's code)
`

// exitCode is the process exit code for a command's error.
func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	var coder kong.ExitCoder
	if errors.As(err, &coder) {
		return coder.ExitCode()
	}
	if code, ok := exitCodes[connect.CodeOf(err)]; ok {
		return code
	}
	return exitFailure
}

// codeError is an error that carries its own exit code, for failures that
// are not a connect error (a usage mistake found after parsing, a partial
// batch, an HTTP status).
type codeError struct {
	code int
	err  error
}

func (e *codeError) Error() string { return e.err.Error() }
func (e *codeError) Unwrap() error { return e.err }

// ExitCode implements kong.ExitCoder.
func (e *codeError) ExitCode() int { return e.code }

func withCode(code int, format string, args ...any) error {
	return &codeError{code: code, err: fmt.Errorf(format, args...)}
}

// usageErrorf is a command line that parsed but does not make sense (two
// flags that exclude each other): the same code as kong's parse errors.
func usageErrorf(format string, args ...any) error {
	return withCode(exitUsage, format, args...)
}
