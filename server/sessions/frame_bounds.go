package sessions

import (
	"encoding/json"
	"errors"
	"fmt"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/server/internal/wire"
)

// A worker frame's bounds on what decoding it builds. A frame is read whole
// (up to MaxRequestBytes) before it is decoded, but decoding may cost far
// more than the frame: each entry of a repeated field or map becomes a Go
// value of its own, a string header or a message, for as little as two
// bytes on the wire. A Heartbeat of a million ids (28 MB) took 111 MiB to
// decode; a BatchResult of 32 MiB of empty Results would take gigabytes.
// So each WorkerService codec counts those entries on the encoded bytes
// first, and refuses a frame over a bound before building any of them.

// frameCounts are the entries of a worker frame's repeated fields and
// maps, summed over every occurrence of the frame's fields (decoding
// merges repeated occurrences, so it builds them all).
type frameCounts struct {
	heartbeatIDs int // Heartbeat.active_task_ids and active_attempt_ids
	results      int // BatchResult.results
	queues       int // Hello.queues
	labels       int // Hello.labels
	batchTypes   int // Hello.batch_types
	types        int // Hello.types
}

// check returns the first bound c is over, in words that name it.
func (c frameCounts) check() error {
	switch {
	case c.heartbeatIDs > wire.MaxHeartbeatIDs:
		return fmt.Errorf("heartbeat lists %d ids; the limit is %d", c.heartbeatIDs, wire.MaxHeartbeatIDs)
	case c.results > wire.MaxGroupSize:
		return fmt.Errorf("batch_result lists %d results; the limit is %d (the most members a batch has)", c.results, wire.MaxGroupSize)
	case c.queues > wire.MaxHelloQueues:
		return fmt.Errorf("hello.queues lists %d queues; the limit is %d", c.queues, wire.MaxHelloQueues)
	case c.labels > wire.MaxHelloLabels:
		return fmt.Errorf("hello.labels has %d entries; the limit is %d", c.labels, wire.MaxHelloLabels)
	case c.batchTypes > wire.MaxHelloBatchTypes:
		return fmt.Errorf("hello.batch_types lists %d types; the limit is %d", c.batchTypes, wire.MaxHelloBatchTypes)
	case c.types > wire.MaxHelloTypes:
		return fmt.Errorf("hello.types lists %d types; the limit is %d", c.types, wire.MaxHelloTypes)
	}
	return nil
}

// AppendCodec is a codec that can marshal into a buffer it is given, as
// connect's own do: the session's Dispatches are encoded into pooled
// buffers.
type AppendCodec interface {
	connect.Codec
	MarshalAppend(dst []byte, message any) ([]byte, error)
}

// frameCodec is the codec it wraps but for decoding a WorkerMessage,
// which it refuses when its counts, read by count from the encoded bytes,
// are over a bound. The error ends the session with invalid_argument.
type frameCodec struct {
	AppendCodec
	count func([]byte) (frameCounts, error)
}

// Codecs are the WorkerService handler's codecs: binary protobuf, and
// json (the server's JSON codecs, one per name it answers to), each
// bounding frames before decoding them. They replace the handler's codecs
// of the same names.
func Codecs(json ...AppendCodec) []connect.HandlerOption {
	opts := []connect.HandlerOption{connect.WithCodec(frameCodec{protoCodec{}, protoFrameCounts})}
	for _, c := range json {
		opts = append(opts, connect.WithCodec(frameCodec{c, jsonFrameCounts}))
	}
	return opts
}

func (c frameCodec) Unmarshal(b []byte, message any) error {
	if _, ok := message.(*conveyorv1.WorkerMessage); ok {
		n, err := c.count(b)
		if err != nil {
			return err
		}
		if err := n.check(); err != nil {
			return err
		}
	}
	return c.AppendCodec.Unmarshal(b, message)
}

// protoCodec is connect's binary protobuf codec, which connect does not
// export for wrapping.
type protoCodec struct{}

func (protoCodec) Name() string { return "proto" }

func (protoCodec) Marshal(message any) ([]byte, error) {
	return protoCodec{}.MarshalAppend(nil, message)
}

func (protoCodec) MarshalAppend(dst []byte, message any) ([]byte, error) {
	m, ok := message.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("%T is not a proto.Message", message)
	}
	return proto.MarshalOptions{}.MarshalAppend(dst, m)
}

func (protoCodec) Unmarshal(b []byte, message any) error {
	m, ok := message.(proto.Message)
	if !ok {
		return fmt.Errorf("%T is not a proto.Message", message)
	}
	if err := proto.Unmarshal(b, m); err != nil {
		return fmt.Errorf("unmarshal into %T: %w", message, err)
	}
	return nil
}

// The field numbers protoFrameCounts looks for, from the generated
// descriptors.
var (
	numHello          = fieldNumber(&conveyorv1.WorkerMessage{}, "hello")
	numHeartbeat      = fieldNumber(&conveyorv1.WorkerMessage{}, "heartbeat")
	numBatchResult    = fieldNumber(&conveyorv1.WorkerMessage{}, "batch_result")
	numQueues         = fieldNumber(&conveyorv1.Hello{}, "queues")
	numLabels         = fieldNumber(&conveyorv1.Hello{}, "labels")
	numBatchTypes     = fieldNumber(&conveyorv1.Hello{}, "batch_types")
	numTypes          = fieldNumber(&conveyorv1.Hello{}, "types")
	numActiveTaskIDs  = fieldNumber(&conveyorv1.Heartbeat{}, "active_task_ids")
	numActiveAttempts = fieldNumber(&conveyorv1.Heartbeat{}, "active_attempt_ids")
	numResults        = fieldNumber(&conveyorv1.BatchResult{}, "results")
)

func fieldNumber(m proto.Message, name protoreflect.Name) protowire.Number {
	return m.ProtoReflect().Descriptor().Fields().ByName(name).Number()
}

// protoFrameCounts counts the entries of a binary WorkerMessage. It never
// fails: counting stops where the bytes stop being well formed, which is
// as far as decoding would get, and decoding reports the fault.
func protoFrameCounts(b []byte) (frameCounts, error) {
	var c frameCounts
	eachBytesField(b, func(num protowire.Number, v []byte) {
		switch num {
		case numHello:
			eachBytesField(v, func(num protowire.Number, _ []byte) {
				switch num {
				case numQueues:
					c.queues++
				case numLabels:
					c.labels++
				case numBatchTypes:
					c.batchTypes++
				case numTypes:
					c.types++
				}
			})
		case numHeartbeat:
			eachBytesField(v, func(num protowire.Number, _ []byte) {
				if num == numActiveTaskIDs || num == numActiveAttempts {
					c.heartbeatIDs++
				}
			})
		case numBatchResult:
			eachBytesField(v, func(num protowire.Number, _ []byte) {
				if num == numResults {
					c.results++
				}
			})
		}
	})
	return c, nil
}

// eachBytesField calls f with the number and value of each length-delimited
// field of the encoded message b, in order, until b ends or stops being
// well formed. Fields of other wire types are skipped (decoding keeps a
// known field of the wrong type as an unknown one, in the bytes it came in).
func eachBytesField(b []byte, f func(protowire.Number, []byte)) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return
		}
		b = b[n:]
		if typ != protowire.BytesType {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return
		}
		f(num, v)
		b = b[n:]
	}
}

// jsonFrame is what jsonFrameCounts reads of a JSON WorkerMessage: the
// lists and maps, under both the JSON and the proto names protojson
// accepts. encoding/json skips the rest without building it, and matches
// names regardless of case, which counts more than protojson would decode,
// never less. A name given twice adds up, as a field repeated in binary.
type jsonFrame struct {
	Hello *struct {
		Queues          jsonCount `json:"queues"`
		Labels          jsonCount `json:"labels"`
		BatchTypes      jsonCount `json:"batchTypes"`
		BatchTypesProto jsonCount `json:"batch_types"`
		Types           jsonCount `json:"types"`
	} `json:"hello"`
	Heartbeat *struct {
		TaskIDs         jsonCount `json:"activeTaskIds"`
		TaskIDsProto    jsonCount `json:"active_task_ids"`
		AttemptIDs      jsonCount `json:"activeAttemptIds"`
		AttemptIDsProto jsonCount `json:"active_attempt_ids"`
	} `json:"heartbeat"`
	BatchResult      *jsonResults `json:"batchResult"`
	BatchResultProto *jsonResults `json:"batch_result"`
}

type jsonResults struct {
	Results jsonCount `json:"results"`
}

// jsonFrameCounts counts the entries of a JSON WorkerMessage. A frame that
// is not JSON at all is refused here, before protojson would decode what
// comes before the fault; one of the wrong shape is left to protojson.
func jsonFrameCounts(b []byte) (frameCounts, error) {
	var f jsonFrame
	err := json.Unmarshal(b, &f)
	var syntax *json.SyntaxError
	if errors.As(err, &syntax) {
		return frameCounts{}, fmt.Errorf("unmarshal into %T: %s", &conveyorv1.WorkerMessage{}, wire.BoundMessage(err.Error()))
	}
	var c frameCounts
	if h := f.Hello; h != nil {
		c.queues, c.labels = int(h.Queues), int(h.Labels)
		c.batchTypes = int(h.BatchTypes + h.BatchTypesProto)
		c.types = int(h.Types)
	}
	if h := f.Heartbeat; h != nil {
		c.heartbeatIDs = int(h.TaskIDs + h.TaskIDsProto + h.AttemptIDs + h.AttemptIDsProto)
	}
	for _, r := range []*jsonResults{f.BatchResult, f.BatchResultProto} {
		if r != nil {
			c.results += int(r.Results)
		}
	}
	return c, nil
}

// jsonCount counts the elements of a JSON array, or the members of an
// object, without decoding them; null and other values count 0.
type jsonCount int

// UnmarshalJSON adds the entries of raw, a valid JSON value, to c.
func (c *jsonCount) UnmarshalJSON(raw []byte) error {
	depth, commas, some := 0, 0, false
	inString, escaped := false, false
	for _, ch := range raw {
		if inString {
			switch {
			case escaped:
				escaped = false
			case ch == '\\':
				escaped = true
			case ch == '"':
				inString = false
			}
			continue
		}
		switch ch {
		case ' ', '\t', '\n', '\r':
		case ',':
			if depth == 1 {
				commas++
			}
		case ']', '}':
			depth--
		case '[', '{':
			some = some || depth == 1
			depth++
		case '"':
			some = some || depth == 1
			inString = true
		default:
			some = some || depth == 1
		}
	}
	if some {
		*c += jsonCount(commas + 1)
	}
	return nil
}
