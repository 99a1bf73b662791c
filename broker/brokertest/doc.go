// Package brokertest is the conformance suite every broker engine must pass.
//
// An engine's own tests call Run with a function that opens its store:
//
//	func TestConformance(t *testing.T) {
//		brokertest.Run(t, func(t testing.TB, store string, n broker.Notifier) broker.Broker {
//			e, err := bolt.Open(bolt.Config{Path: filepath.Join(store, "c.db"), Notifier: n})
//			if err != nil {
//				t.Fatal(err)
//			}
//			t.Cleanup(func() { _ = e.Close() })
//			return e
//		})
//	}
//
// Every subtest gets a fresh store (a new directory), so the subtests of a
// group run in parallel. The suite passes its own Notifier (Notes) to
// observe the engine's signals, and reopens a store, after closing the
// broker on it, to test what survives a restart.
//
// The suite drives time explicitly: every call that takes a Now gets a value
// derived from T0, so timers, leases, retries, expiry and retention are
// tested without sleeping. It assumes no policy of the engine's: it passes
// every decision (Complete, Reclaim), every retry time and every purge
// horizon itself, and builds tasks as the server hands them to an engine,
// with defaults applied and the initial state chosen (InitialState).
//
// What is specific to one engine (bbolt's group commit, its file checks,
// its migrations) is tested in that engine's package.
package brokertest
