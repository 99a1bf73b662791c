package main

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Everything the CLI prints for people goes through safeText (the table,
// the listing and writef call it), so that text stored on the server (a
// task's type, metadata, error, progress message or result, a worker's
// labels, a cron entry, a queue or group name) cannot drive the terminal
// it is printed on: set its title, hide or rewrite text, fake a link, or
// reorder what follows. JSON output is escaped the same way by jsonSafe.

// safeText is s with every character that could act on a terminal shown
// escaped, visibly, instead of sent:
//   - C0 controls (ESC, BEL, CR, line breaks, tabs...) and DEL, as \xHH
//     (\n, \r and \t by those names);
//   - C1 controls (U+0080 to U+009F, CSI and OSC among them), as \uHHHH;
//   - the bidirectional overrides and isolates (U+202A to U+202E, U+2066
//     to U+2069), which reorder the text after them, and the line and
//     paragraph separators (U+2028, U+2029), as \uHHHH;
//   - each byte of invalid UTF-8, as \xHH.
//
// Everything else is kept, so the result is s itself in the usual case.
func safeText(s string) string {
	i := unsafeAt(s)
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
		i += size
	}
	return b.String()
}

// unsafeAt is the index of the first byte of s that safeText escapes, or
// -1 when there is none.
func unsafeAt(s string) int {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return i
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || unsafeRune(r) {
			return i
		}
		i += size
	}
	return -1
}

// unsafeRune reports whether r, past ASCII, is one safeText escapes: a C1
// control, a bidirectional override or isolate, or a line or paragraph
// separator.
func unsafeRune(r rune) bool {
	return r >= 0x80 && r <= 0x9f ||
		r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 ||
		r == 0x2028 || r == 0x2029
}

// jsonSafe is JSON text b with the characters safeText escapes that JSON
// encoders leave as they are (DEL, the C1 controls, the bidirectional
// controls; encoding/json and protojson escape C0 themselves) written as
// \u escapes. Outside strings, JSON has only ASCII, so every such
// character is inside a string, where the escape means the same
// character: the JSON decodes to the same values.
func jsonSafe(b []byte) []byte {
	var out []byte
	done := 0 // b[:done] is in out, when out is not nil
	for i := 0; i < len(b); {
		r, size := rune(b[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRune(b[i:])
		}
		if r == 0x7f || unsafeRune(r) {
			out = append(out, b[done:i]...)
			out = fmt.Appendf(out, `\u%04x`, r)
			done = i + size
		}
		i += size
	}
	if out == nil {
		return b
	}
	return append(out, b[done:]...)
}
