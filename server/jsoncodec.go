package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/conveyor-dev/conveyor/server/internal/wire"
)

// jsonCodec is connect's protobuf JSON codec (unknown fields dropped, as
// protocol §8 asks) but for its decoding errors, whose messages are
// bounded (wire.BoundMessage). protojson quotes the value it could not read,
// and a decoding error is answered before any interceptor sees it, so
// without this a bytes field of megabytes of bad base64 in a gRPC-JSON
// call would come back in the grpc-message header (see
// wire.MaxErrorTextBytes).
type jsonCodec struct{ name string }

// jsonCodecs replace connect's two JSON codecs.
var jsonCodecs = []connect.HandlerOption{
	connect.WithCodec(jsonCodec{name: "json"}),
	connect.WithCodec(jsonCodec{name: "json; charset=utf-8"}),
}

func (c jsonCodec) Name() string { return c.name }

func (jsonCodec) IsBinary() bool { return false }

func (jsonCodec) Marshal(message any) ([]byte, error) {
	m, ok := message.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("%T is not a proto.Message", message)
	}
	return protojson.MarshalOptions{}.Marshal(m)
}

func (jsonCodec) MarshalAppend(dst []byte, message any) ([]byte, error) {
	m, ok := message.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("%T is not a proto.Message", message)
	}
	return protojson.MarshalOptions{}.MarshalAppend(dst, m)
}

// MarshalStable is Marshal with protojson's varying whitespace taken out.
func (c jsonCodec) MarshalStable(message any) ([]byte, error) {
	b, err := c.Marshal(message)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

func (jsonCodec) Unmarshal(b []byte, message any) error {
	m, ok := message.(proto.Message)
	if !ok {
		return fmt.Errorf("%T is not a proto.Message", message)
	}
	if len(b) == 0 {
		return errors.New("zero-length payload is not a valid JSON object")
	}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, m); err != nil {
		return fmt.Errorf("unmarshal into %T: %s", message, wire.BoundMessage(err.Error()))
	}
	return nil
}
