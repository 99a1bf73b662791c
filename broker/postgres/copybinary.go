package postgres

import "encoding/binary"

// copyRowsBuf builds a COPY ... FROM STDIN (FORMAT binary) stream by
// hand. pgx's CopyFrom encodes each value through its type map (a boxed
// value and a plan lookup each: a fifth of the server's CPU in W1, whose
// rows have 32 columns); here each column's writer is chosen by the code
// that knows its type (docs/benchmarks.md, the twentieth pass).
type copyRowsBuf struct{ b []byte }

// copySignature opens every binary COPY stream: the signature, the
// flags (none) and the header extension's length (none).
var copySignature = []byte("PGCOPY\n\xff\r\n\x00\x00\x00\x00\x00\x00\x00\x00\x00")

func newCopyRowsBuf(size int) *copyRowsBuf {
	b := make([]byte, 0, size)
	return &copyRowsBuf{b: append(b, copySignature...)}
}

// row starts a row of n columns.
func (c *copyRowsBuf) row(n int) { c.b = binary.BigEndian.AppendUint16(c.b, uint16(n)) }

func (c *copyRowsBuf) null() { c.b = binary.BigEndian.AppendUint32(c.b, 0xffffffff) }

func (c *copyRowsBuf) size(n int) { c.b = binary.BigEndian.AppendUint32(c.b, uint32(n)) }

func (c *copyRowsBuf) text(s string) {
	c.size(len(s))
	c.b = append(c.b, s...)
}

// textOrNull writes "" as NULL, as nullString does.
func (c *copyRowsBuf) textOrNull(s string) {
	if s == "" {
		c.null()
		return
	}
	c.text(s)
}

// bytea writes nil as NULL.
func (c *copyRowsBuf) bytea(b []byte) {
	if b == nil {
		c.null()
		return
	}
	c.size(len(b))
	c.b = append(c.b, b...)
}

// jsonb writes JSON text (nil: NULL) in jsonb's binary form, its
// version (1) first.
func (c *copyRowsBuf) jsonb(b []byte) {
	if b == nil {
		c.null()
		return
	}
	c.size(len(b) + 1)
	c.b = append(append(c.b, 1), b...)
}

func (c *copyRowsBuf) int2(v int16) {
	c.size(2)
	c.b = binary.BigEndian.AppendUint16(c.b, uint16(v))
}

func (c *copyRowsBuf) int4(v int32) {
	c.size(4)
	c.b = binary.BigEndian.AppendUint32(c.b, uint32(v))
}

func (c *copyRowsBuf) int8(v int64) {
	c.size(8)
	c.b = binary.BigEndian.AppendUint64(c.b, uint64(v))
}

func (c *copyRowsBuf) int2OrNull(p *int16) {
	if p == nil {
		c.null()
		return
	}
	c.int2(*p)
}

func (c *copyRowsBuf) int8OrNull(p *int64) {
	if p == nil {
		c.null()
		return
	}
	c.int8(*p)
}

func (c *copyRowsBuf) boolean(v bool) {
	c.size(1)
	if v {
		c.b = append(c.b, 1)
	} else {
		c.b = append(c.b, 0)
	}
}

// end closes the stream and returns it.
func (c *copyRowsBuf) end() []byte { return binary.BigEndian.AppendUint16(c.b, 0xffff) }
