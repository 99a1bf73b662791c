package conveyortest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"reflect"
)

// wantPayload is a Want's payload, ready to compare with tasks'.
type wantPayload struct {
	raw   []byte // the expected bytes
	value any    // raw decoded and normalized; nil when raw is not JSON
	json  bool   // raw is JSON
}

// newWantPayload takes v as Want.Payload documents: []byte and
// json.RawMessage are the bytes themselves, any other value is encoded
// with encoding/json.
func newWantPayload(v any) (*wantPayload, error) {
	var raw []byte
	switch p := v.(type) {
	case []byte:
		raw = p
	case json.RawMessage:
		raw = p
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("encode Want.Payload (%T) as JSON: %w", v, err)
		}
		raw = b
	}
	w := &wantPayload{raw: raw}
	w.value, w.json = decodeJSON(raw)
	return w, nil
}

// matches reports whether payload is the one wanted: the same JSON value
// (whatever its spacing, key order or number spelling), or the same bytes
// when either is not JSON.
func (w *wantPayload) matches(payload []byte) bool {
	if !w.json {
		return bytes.Equal(w.raw, payload)
	}
	got, ok := decodeJSON(payload)
	return ok && reflect.DeepEqual(w.value, got)
}

// decodeJSON decodes b into plain values with numbers normalized (see
// normalize), and reports whether b is one JSON value.
func decodeJSON(b []byte) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	if dec.More() {
		return nil, false
	}
	return normalize(v), true
}

// number is a normalized JSON number: a type of its own, so that it never
// equals the string of the same digits.
type number string

// normalize replaces each JSON number in v by its exact value as a
// fraction in lowest terms, so that 1, 1.0 and 1e0 compare equal and
// large integers (ids) are not rounded as float64 would round them.
func normalize(v any) any {
	switch x := v.(type) {
	case json.Number:
		r, ok := new(big.Rat).SetString(x.String())
		if !ok {
			return number(x.String())
		}
		return number(r.RatString())
	case map[string]any:
		for k, e := range x {
			x[k] = normalize(e)
		}
	case []any:
		for i, e := range x {
			x[i] = normalize(e)
		}
	}
	return v
}
