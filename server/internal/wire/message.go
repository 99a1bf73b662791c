package wire

import (
	"strconv"
	"unicode/utf8"
)

// MaxErrorTextBytes bounds the message of every error the services
// answer with. In gRPC and gRPC-Web the message travels in a header
// (grpc-message), and clients refuse large headers: Go's fails the whole
// connection with COMPRESSION_ERROR past 10 MB, grpc-go's refuses one past
// 16 KiB. A message that quoted a client's string of megabytes (an id, a
// queue name, a page token) would reach its caller as a broken connection,
// a transient error, instead of the error it is.
const MaxErrorTextBytes = 1 << 10

// Of a message cut to fit, the start names the field and the end says what
// is wrong with it; the middle, the client's own long string, goes.
const (
	errorHeadBytes = 640
	errorTailBytes = 256
)

// BoundMessage is msg if it fits in MaxErrorTextBytes, else its start
// and its end, cut at UTF-8 boundaries, around a note of how much went.
func BoundMessage(msg string) string {
	if len(msg) <= MaxErrorTextBytes {
		return msg
	}
	head := errorHeadBytes
	for head > 0 && !utf8.RuneStart(msg[head]) {
		head--
	}
	tail := len(msg) - errorTailBytes
	for tail < len(msg) && !utf8.RuneStart(msg[tail]) {
		tail++
	}
	return msg[:head] + " … [" + strconv.Itoa(tail-head) + " bytes cut] … " + msg[tail:]
}

// MaxEchoBytes bounds how much of a client's string an error message
// quotes: the message travels in a header (grpc-message), so it must stay
// small whatever the client sent.
const MaxEchoBytes = 64
