package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// jsonOptions print every field, set or not, so that scripts can rely on
// the keys being there. Field names are protojson's (lowerCamelCase).
var jsonOptions = protojson.MarshalOptions{EmitUnpopulated: true}

// protoJSON is m in the proto3 JSON mapping, compact. protojson varies its
// whitespace on purpose (so nobody depends on it); writeJSON re-indents.
func protoJSON(m proto.Message) (json.RawMessage, error) {
	b, err := jsonOptions.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode %s as JSON: %w", m.ProtoReflect().Descriptor().Name(), err)
	}
	return b, nil
}

// writeJSON writes m indented by two spaces, with a final line break.
func writeJSON(w io.Writer, m proto.Message) error {
	b, err := protoJSON(m)
	if err != nil {
		return err
	}
	return writeIndented(w, b)
}

// writeJSONList writes ms as one JSON array, indented as writeJSON does:
// every list the CLI prints has this shape, empty ones too ("[]").
func writeJSONList[M proto.Message](w io.Writer, ms []M) error {
	a := jsonArray{w: w}
	for _, m := range ms {
		if err := a.add(m); err != nil {
			return err
		}
	}
	return a.close()
}

// jsonArray writes a JSON array one element at a time, so that a long
// listing (task ls --all) is not held in memory; the bytes are those
// json.Indent gives for the whole array.
type jsonArray struct {
	w io.Writer
	n int
}

func (a *jsonArray) add(m proto.Message) error {
	b, err := protoJSON(m)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	if a.n == 0 {
		out.WriteString("[\n  ")
	} else {
		out.WriteString(",\n  ")
	}
	if err := json.Indent(&out, b, "  ", "  "); err != nil {
		return fmt.Errorf("indent JSON: %w", err)
	}
	a.n++
	_, err = a.w.Write(jsonSafe(out.Bytes()))
	return err
}

func (a *jsonArray) close() error {
	end := "\n]\n"
	if a.n == 0 {
		end = "[]\n"
	}
	_, err := io.WriteString(a.w, end)
	return err
}

// writeJSONValue writes a value the CLI builds itself (such as a backup's
// summary, or an object of protojson parts) the same way.
func writeJSONValue(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode JSON: %w", err)
	}
	return writeIndented(w, b)
}

// writeIndented re-indents compact or irregular JSON: json.Indent drops the
// input's insignificant whitespace and writes its own.
func writeIndented(w io.Writer, b []byte) error {
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return fmt.Errorf("indent JSON: %w", err)
	}
	out.WriteByte('\n')
	_, err := w.Write(jsonSafe(out.Bytes()))
	return err
}

// table is an aligned table for people: a header row, then one row per
// item. Columns are as wide as their widest cell (in runes) and two spaces
// apart; the last cell of a row is not padded. On a terminal the header is
// bold and cells given a style are coloured (color.go); the widths are
// the text's, so colour never moves a column.
type table struct {
	w      io.Writer
	color  bool
	rows   [][]string
	styles [][]style // per row, per cell; nil: none
}

func newTable(w io.Writer, headers ...string) *table {
	t := &table{w: w, color: colorFor(w)}
	hs := make([]style, len(headers))
	for i := range hs {
		hs[i] = styleHeader
	}
	t.styledRow(hs, headers...)
	return t
}

// row adds one row. Every cell is made safe for a terminal (safeText):
// a tab or line break in a cell is shown escaped, so it cannot break the
// alignment, and the widths are those of the escaped text.
func (t *table) row(cells ...string) { t.styledRow(nil, cells...) }

// styledRow is row with a style per cell (styles may be shorter).
func (t *table) styledRow(styles []style, cells ...string) {
	safe := make([]string, len(cells))
	for i, c := range cells {
		safe[i] = safeText(c)
	}
	t.rows = append(t.rows, safe)
	t.styles = append(t.styles, styles)
}

func (t *table) flush() error {
	var widths []int
	for _, r := range t.rows {
		for i, c := range r[:max(len(r)-1, 0)] { // the last cell is not padded
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	var b strings.Builder
	for ri, r := range t.rows {
		for i, c := range r {
			text := c
			if t.color && i < len(t.styles[ri]) {
				text = paint(t.styles[ri][i], c)
			}
			b.WriteString(text)
			if i < len(r)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c)+2))
			}
		}
		b.WriteByte('\n')
	}
	t.rows, t.styles = nil, nil
	_, err := io.WriteString(t.w, b.String())
	return err
}

// listing is a key/value listing with the values aligned in one column.
// A value is one line; a block (a payload, a result, an error) may have
// several, each laid out under the first. Every line is made safe for a
// terminal (safeText) as it is written: a value's own line break shows as
// "\n", and a block's line breaks become the listing's continuation
// lines, indented, so that no value can start a line of its own.
type listing struct {
	keys   []string
	values [][]string // each value's lines
}

func (l *listing) add(k, v string) {
	l.keys = append(l.keys, k)
	l.values = append(l.values, []string{v})
}

func (l *listing) addIf(k, v string) {
	if v != "" {
		l.add(k, v)
	}
}

// addBlock adds text shown line by line; a line break is "\n" or "\r\n".
func (l *listing) addBlock(k, text string) {
	lines := strings.Split(text, "\n")
	for i, line := range lines {
		lines[i] = strings.TrimSuffix(line, "\r")
	}
	l.keys = append(l.keys, k)
	l.values = append(l.values, lines)
}

func (l *listing) addBlockIf(k, text string) {
	if text != "" {
		l.addBlock(k, text)
	}
}

func (l *listing) addTime(k string, t *timestamppb.Timestamp) {
	if t != nil {
		l.add(k, showTime(t))
	}
}

func (l *listing) write(w io.Writer) error {
	keys := make([]string, len(l.keys))
	width := 0
	for i, k := range l.keys {
		keys[i] = safeText(k) // a map's keys (info's task counts) come from the server
		width = max(width, utf8.RuneCountInString(keys[i]))
	}
	var b strings.Builder
	for i, k := range keys {
		lines := l.values[i]
		fmt.Fprintf(&b, "%-*s  %s\n", width, k, safeText(lines[0]))
		for _, line := range lines[1:] {
			fmt.Fprintf(&b, "%*s  %s\n", width, "", safeText(line))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writef is fmt.Fprintf for a line of plain text, with every string
// argument made safe for a terminal (safeText): the format is the CLI's,
// the arguments may come from the server.
func writef(w io.Writer, format string, args ...any) error {
	for i, a := range args {
		if s, ok := a.(string); ok {
			args[i] = safeText(s)
		}
	}
	_, err := fmt.Fprintf(w, format, args...)
	return err
}

// showTime is t in local time, RFC 3339 to the second; "-" when unset.
func showTime(t *timestamppb.Timestamp) string {
	if t == nil {
		return "-"
	}
	return t.AsTime().Local().Format(time.RFC3339)
}

// showDuration is d as Go prints durations ("1m30s"); "-" when unset.
func showDuration(d *durationpb.Duration) string {
	if d == nil {
		return "-"
	}
	return d.AsDuration().String()
}

// showSize is n bytes for people: "16.0 MiB (16777216 bytes)".
func showSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d bytes", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB (%d bytes)", float64(n)/float64(div), "KMGTPE"[exp], n)
}

// orDash is s, or "-" when empty, so a table cell is never blank.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// firstLine is s's first line, cut to n runes, for a table cell.
func firstLine(s string, n int) string {
	s, _, _ = strings.Cut(s, "\n")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// maxShownBytes bounds how much of a payload or result the listing shows.
const maxShownBytes = 512

// showBytes is b as text when it is printable UTF-8 (without its final
// line break), else its size.
func showBytes(b []byte) string {
	if len(b) == 0 {
		return "(empty)"
	}
	if !printable(b) {
		return fmt.Sprintf("(%d bytes, not printable)", len(b))
	}
	if len(b) <= maxShownBytes {
		return strings.TrimRight(string(b), "\r\n")
	}
	cut := maxShownBytes
	for cut > 0 && !utf8.RuneStart(b[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", b[:cut], len(b))
}

// printable reports whether b is valid UTF-8 made of printable characters,
// spaces, tabs and line breaks.
func printable(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if !unicode.IsPrint(r) && r != '\n' && r != '\t' && r != '\r' {
			return false
		}
	}
	return true
}
