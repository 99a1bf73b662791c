package server_test

import (
	"runtime"
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// BenchmarkHeldUnauthenticated measures what a client without the token
// makes a server with one hold: the heap and stacks of the whole process,
// after a GC, per connection or stream it keeps open. The client side is a
// bare socket (rawH2, not reading), so the figures are the server's; a
// stream's figure includes its share of a connection (MaxHealthCallsPerConn
// streams share one). Run it with a fixed count below the bounds, e.g.
// -benchtime=500x: each iteration is one connection or stream, held to the
// end.
func BenchmarkHeldUnauthenticated(b *testing.B) {
	const perConn = server.MaxHealthCallsPerConn
	cases := []struct {
		name       string
		bound      int             // the most the server holds
		goroutines func(n int) int // the server's, for n held
		hold       func(b *testing.B, s *servertest.Server, i int, conns []*rawH2) []*rawH2
	}{
		{"preface-only-conn", server.MaxUnprovenConns, func(n int) int { return 2 * n }, func(b *testing.B, s *servertest.Server, _ int, conns []*rawH2) []*rawH2 {
			return append(conns, dialRawH2(b, s.Addr().String(), false))
		}},
		{"watch-stream", server.MaxWatchStreams, func(n int) int { return n + 2*((n+perConn-1)/perConn) }, func(b *testing.B, s *servertest.Server, i int, conns []*rawH2) []*rawH2 {
			if i%perConn == 0 {
				conns = append(conns, dialRawH2(b, s.Addr().String(), false))
			}
			conns[len(conns)-1].grpcCall(b, "/grpc.health.v1.Health/Watch", true)
			return conns
		}},
		{"held-health-check", server.MaxUnprovenConns * perConn, func(n int) int { return n + 2*((n+perConn-1)/perConn) }, func(b *testing.B, s *servertest.Server, i int, conns []*rawH2) []*rawH2 {
			if i%perConn == 0 {
				conns = append(conns, dialRawH2(b, s.Addr().String(), false))
			}
			conns[len(conns)-1].grpcCall(b, "/grpc.health.v1.Health/Check", false)
			return conns
		}},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			if b.N > tc.bound {
				b.Skipf("%d past the server's bound of %d: run with -benchtime=Nx, N at most the bound", b.N, tc.bound)
			}
			s := servertest.Start(b, server.Config{Token: "s3cret"})
			inUse := func() uint64 {
				runtime.GC()
				var m runtime.MemStats
				runtime.ReadMemStats(&m)
				return m.HeapInuse + m.StackInuse
			}
			g0, before := runtime.NumGoroutine(), inUse()
			var conns []*rawH2
			b.ResetTimer()
			for i := range b.N {
				conns = tc.hold(b, s, i, conns)
			}
			b.StopTimer()
			servertest.Eventually(b, 30*time.Second, "the server holds what was sent", func() bool {
				return runtime.NumGoroutine()-g0 >= tc.goroutines(b.N)
			})
			b.ReportMetric(float64(int64(inUse())-int64(before))/float64(b.N), "B/held")
			for _, c := range conns {
				_ = c.conn.Close()
			}
		})
	}
}
