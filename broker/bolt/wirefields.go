package bolt

import (
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Reading a stored record field by field, without decoding it: for the
// reads that need a field or two of a record whose payload may be a
// megabyte. (The reopen's decoder, liverecord.go, walks the wire format
// with its own loop, tuned for ten million records.)

// splitField reads the first field of the encoded message b: its number,
// its wire type, its value (the bytes after its tag, to b's end) and its
// length in b, tag included; n < 0 when b does not start with a whole
// field.
func splitField(b []byte) (num protowire.Number, typ protowire.Type, value []byte, n int) {
	num, typ, tag := protowire.ConsumeTag(b)
	if tag < 0 {
		return 0, 0, nil, tag
	}
	m := protowire.ConsumeFieldValue(num, typ, b[tag:])
	if m < 0 {
		return 0, 0, nil, m
	}
	return num, typ, b[tag:], tag + m
}

// withoutFields returns a copy of the encoded message b without its
// top-level fields numbered drop; a malformed b is returned as is, for
// Unmarshal to refuse.
func withoutFields(b []byte, drop []protowire.Number) []byte {
	out := make([]byte, 0, min(len(b), 1024))
	for rest := b; len(rest) > 0; {
		num, _, _, n := splitField(rest)
		if n < 0 {
			return b
		}
		if !slices.Contains(drop, num) {
			out = append(out, rest[:n]...)
		}
		rest = rest[n:]
	}
	return out
}

// fieldNumbers returns the numbers of m's fields by name (it panics on a
// name m does not have: the names are constants of this package).
func fieldNumbers(m proto.Message, names ...protoreflect.Name) []protowire.Number {
	fields := m.ProtoReflect().Descriptor().Fields()
	nums := make([]protowire.Number, len(names))
	for i, name := range names {
		nums[i] = fields.ByName(name).Number()
	}
	return nums
}
