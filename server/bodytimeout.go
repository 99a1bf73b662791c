package server

import (
	"net/http"
	"time"
)

// bodyTimeout gives a request's body d to arrive in full; past it, reading
// the body fails (os.ErrDeadlineExceeded), and with it the call. Without
// it, a client that starts a call and never finishes its request holds the
// handler, and the stream, for as long as its connection lives.
//
// It bounds the client's sending, never the handler's work: once the body
// has been read to its end, the deadline no longer matters (HTTP/1.1 lifts
// it to watch for the client going away, HTTP/2 has nothing left to cut).
// A request without a body gets none: on HTTP/1.1 that watch starts before
// the handler, and a deadline would end the connection, and cancel the
// call, while the handler runs.
func bodyTimeout(d time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(d))
		}
		next.ServeHTTP(w, r)
	})
}
