package bolt

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/conveyor-dev/conveyor/broker"
)

// liveRecord is the part of a live task's stored TaskStatus that the
// in-memory indexes are rebuilt from, decoded straight from the wire
// format. A reopen decodes every live record, so this skips what a full
// proto.Unmarshal does and the indexes do not need: allocating each
// string (they alias the record, valid while its transaction is open), the
// UTF-8 checks, and the fields the indexes never read (errors, results,
// progress). Field numbers are TaskStatus's in
// protos/conveyor/storage/v1/record.proto; a field with an unexpected
// wire type is skipped, as proto.Unmarshal keeps it as unknown.
type liveRecord struct {
	// What every task needs, first, in one cache line (the indexer reads
	// records the decoder wrote on the other core).
	state, priority, retried, maxRetry int32
	nextProcessAt                      int64
	queue                              []byte
	atMostOnce, startAuthorized        bool
	pushInvoked                        bool
	// rare is set when any field below it but enqueuedAt and typ is.
	rare bool

	enqueuedAt, uniqueUntil, expiresAt, deadline, retention int64
	hasRetention, cancelRequested, dependencyFailed         bool
	uniqueKey, group, concurrencyKey, typ                   []byte
	waitingOn                                               []depRecord
}

// depRecord is a DependencyRecord: a task depended on, and what its
// failure does.
type depRecord struct {
	taskID    []byte
	onFailure int32
}

func (r *liveRecord) State() broker.State { return broker.State(r.state) }

// decode sets r from a TaskStatus's bytes b; r aliases b.
func (r *liveRecord) decode(b []byte) error {
	*r = liveRecord{waitingOn: r.waitingOn[:0]}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		switch typ {
		case protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return fmt.Errorf("field %d: %w", num, protowire.ParseError(n))
			}
			b = b[n:]
			r.setVarint(num, v)
		case protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return fmt.Errorf("field %d: %w", num, protowire.ParseError(n))
			}
			b = b[n:]
			if err := r.setBytes(num, v); err != nil {
				return err
			}
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return fmt.Errorf("field %d: %w", num, protowire.ParseError(n))
			}
			b = b[n:]
		}
	}
	return nil
}

func (r *liveRecord) setVarint(num protowire.Number, v uint64) {
	switch num {
	case 1:
		r.state = int32(v)
	case 3:
		r.priority = int32(v)
	case 4:
		r.retried = int32(v)
	case 5:
		r.maxRetry = int32(v)
	case 6:
		r.enqueuedAt = int64(v)
	case 7:
		r.nextProcessAt = int64(v)
	case 15:
		r.uniqueUntil, r.rare = int64(v), true
	case 16:
		r.expiresAt, r.rare = int64(v), true
	case 18:
		r.retention, r.hasRetention, r.rare = int64(v), true, true
	case 19:
		r.deadline, r.rare = int64(v), true
	case 24:
		r.cancelRequested, r.rare = v != 0, true
	case 26:
		r.dependencyFailed, r.rare = v != 0, true
	case 27:
		r.atMostOnce = v != 0
	case 28:
		r.startAuthorized = v != 0
	case 29:
		r.pushInvoked = v != 0
	}
}

func (r *liveRecord) setBytes(num protowire.Number, v []byte) error {
	switch num {
	case 2:
		r.queue = v
	case 14:
		r.uniqueKey, r.rare = v, true
	case 20:
		r.group, r.rare = v, true
	case 21:
		r.concurrencyKey, r.rare = v, true
	case 23:
		r.typ = v
	case 25:
		d, err := decodeDep(v)
		if err != nil {
			return fmt.Errorf("waiting_on: %w", err)
		}
		r.waitingOn, r.rare = append(r.waitingOn, d), true
	}
	return nil
}

func decodeDep(b []byte) (depRecord, error) {
	var d depRecord
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return d, protowire.ParseError(n)
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return d, protowire.ParseError(n)
			}
			d.taskID, b = v, b[n:]
		case num == 2 && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return d, protowire.ParseError(n)
			}
			d.onFailure, b = int32(v), b[n:]
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return d, protowire.ParseError(n)
			}
			b = b[n:]
		}
	}
	return d, nil
}
