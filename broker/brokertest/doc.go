// Package brokertest is the conformance suite every broker engine must pass.
//
// An engine's own tests call Run with a function that opens a fresh, empty
// engine on a real store:
//
//	func TestConformance(t *testing.T) {
//		brokertest.Run(t, func(t *testing.T) broker.Broker {
//			e, err := bolt.Open(bolt.Config{Path: filepath.Join(t.TempDir(), "c.db")})
//			if err != nil {
//				t.Fatal(err)
//			}
//			t.Cleanup(func() { _ = e.Close() })
//			return e
//		})
//	}
//
// The suite drives time explicitly: every call that takes a Now gets a value
// derived from T0, so timers, leases, retries, expiry and retention are
// tested without sleeping. Every subtest gets its own broker from open, so
// the subtests of a group run in parallel. One subtest closes its broker
// itself, so the cleanup open registers must tolerate a closed broker (Close
// is idempotent by contract).
//
// The suite builds tasks as the server hands them to an engine: defaults
// applied, relative times resolved, and the flat NewTask fields agreeing
// with the producer's Options (a task with a Deadline carries it in both).
//
// Engine-specific behaviour (restart, group commit, notifier signals) is
// tested in the engine's own package, not here: the suite cannot inject a
// Notifier through open.
package brokertest
