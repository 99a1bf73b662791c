package bolt

import (
	"fmt"
	"runtime/debug"

	bbolt "go.etcd.io/bbolt"
)

// scanChunk is how many live records the decoder hands over at a time.
const scanChunk = 1024

// The indexer touches the memory it will need for the prefetchBatch
// records that come prefetchDistance after the one it indexes, every
// prefetchBatch records (see liveChunk.touchAhead).
const (
	prefetchDistance = 32
	prefetchBatch    = 16
)

// liveChunk is a run of decoded live records, in key order.
type liveChunk struct {
	keys []key
	recs []liveRecord
	err  error // the decoder's error; the chunk's records precede it
	// touched is what touchAhead loaded, kept so that the loads stay.
	touched int32
}

// touchAhead loads, back to back, what the indexer will need for the
// records prefetchDistance after i: their home slots in the task table
// (through ahead) and the records themselves, which the decoder wrote on
// the other core. At ten million tasks each of those is a cache miss; a
// run of independent loads lets the CPU wait for several at once instead
// of for each in turn when the insert needs it (BenchmarkReopen at 10M:
// 5.0-5.3 s without, 3.3-3.5 s with).
func (ch *liveChunk) touchAhead(i int, ahead func(k key)) {
	from, to := min(i+prefetchDistance, len(ch.keys)), min(i+prefetchDistance+prefetchBatch, len(ch.keys))
	for j := from; j < to; j++ {
		ahead(ch.keys[j])
		ch.touched += ch.recs[j].state
	}
}

// scanLive calls fn with every record of the live bucket, in key order.
// Decoding takes a good part of a reopen's time, so a second goroutine
// decodes the next chunks while fn indexes this one. fn may keep nothing
// of r, whose bytes are the transaction's.
func scanLive(live *bbolt.Bucket, ahead func(k key), fn func(k key, r *liveRecord) error) error {
	full := make(chan *liveChunk, 2)
	free := make(chan *liveChunk, 3)
	for range cap(free) {
		free <- &liveChunk{keys: make([]key, 0, scanChunk), recs: make([]liveRecord, scanChunk)}
	}
	stop := make(chan struct{})
	go decodeLive(live, full, free, stop)
	defer func() {
		// Wait for the decoder to be done with the transaction: after an
		// error the caller closes it, and the file may then be unmapped.
		close(stop)
		for range full {
		}
	}()
	for ch := range full {
		for i, k := range ch.keys {
			if i%prefetchBatch == 0 {
				ch.touchAhead(i, ahead)
			}
			if err := fn(k, &ch.recs[i]); err != nil {
				return err
			}
		}
		if ch.err != nil {
			return ch.err
		}
		ch.keys = ch.keys[:0]
		free <- ch
	}
	return nil
}

// decodeLive walks the live bucket and sends its records, decoded, in
// chunks on full until the end (then closes full) or until stop. A
// damaged page it reads ends the walk with an error chunk, as ReadGuarded
// does on the caller's goroutine.
func decodeLive(live *bbolt.Bucket, full chan<- *liveChunk, free <-chan *liveChunk, stop <-chan struct{}) {
	defer close(full)
	debug.SetPanicOnFault(true) // this goroutine's only, and it ends here
	defer func() {
		if r := recover(); r != nil {
			select {
			case full <- &liveChunk{err: damaged(live.Tx().DB().Path(), r)}:
			case <-stop:
			}
		}
	}()
	c := live.Cursor()
	kb, v := c.First()
	for kb != nil {
		var ch *liveChunk
		select {
		case <-stop:
			return
		default:
		}
		select {
		case ch = <-free:
		case <-stop:
			return
		}
		for ; kb != nil && len(ch.keys) < scanChunk; kb, v = c.Next() {
			var k key
			copy(k[:], kb)
			if err := ch.recs[len(ch.keys)].decode(v); err != nil {
				ch.err = fmt.Errorf("status of %s: %w", k, err)
				kb = nil
				break
			}
			ch.keys = append(ch.keys, k)
		}
		select {
		case full <- ch:
		case <-stop:
			return
		}
	}
}
