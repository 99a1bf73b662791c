package postgres

import (
	"fmt"
	"strings"

	"github.com/conveyor-dev/conveyor/broker"
)

// PostgreSQL's text (and jsonb) cannot hold a NUL character, which
// Conveyor's strings may: a producer's text that holds one is refused
// (ErrInvalidArgument, naming the field), and a worker's error or progress
// message has it replaced, so that no worker can keep its own Result from
// being recorded.

// storable refuses a new task's text fields that hold a NUL.
func storable(typ, contentType, unique, group, ckey string, metadata map[string]string) error {
	for _, f := range []struct{ name, v string }{{"type", typ}, {"content_type", contentType}, {"unique_key", unique},
		{"group", group}, {"concurrency_key", ckey}} {
		if strings.IndexByte(f.v, 0) >= 0 {
			return nulError(f.name)
		}
	}
	for k, v := range metadata {
		if strings.IndexByte(k, 0) >= 0 || strings.IndexByte(v, 0) >= 0 {
			return nulError("metadata")
		}
	}
	return nil
}

func nulError(field string) error {
	return fmt.Errorf("%s holds a NUL character (\\x00), which the PostgreSQL engine cannot store: %w", field, broker.ErrInvalidArgument)
}

// noNUL replaces the NUL characters of a worker's message.
func noNUL(s string) string {
	if strings.IndexByte(s, 0) < 0 {
		return s
	}
	return strings.ReplaceAll(s, "\x00", "\uFFFD")
}
