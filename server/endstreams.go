package server

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// endAtShutdown ends a long-lived stream whose handler only waits for the
// client (gRPC reflection) once done is canceled: the read deadline of its
// request moves to the past, so the handler's next receive fails and it
// returns. http.Server.Shutdown waits for handlers without canceling
// their contexts, so such a stream would otherwise hold the shutdown until
// its timeout.
func endAtShutdown(done context.Context, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The writer must not be touched once the handler has returned
		// (HTTP/2 drops its state then), hence the lock and the flag.
		var mu sync.Mutex
		returned := false
		stop := context.AfterFunc(done, func() {
			mu.Lock()
			defer mu.Unlock()
			if !returned {
				_ = http.NewResponseController(w).SetReadDeadline(time.Unix(1, 0))
			}
		})
		defer func() {
			stop()
			mu.Lock()
			returned = true
			mu.Unlock()
		}()
		next.ServeHTTP(w, r)
	})
}
