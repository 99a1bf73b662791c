// Package conveyortest helps the tests of code that uses Conveyor: a real
// server in the test's process, assertions on what was enqueued, and a way
// to run one handler on one task.
//
// Start runs a real Conveyor server (the server package, on the embedded
// bbolt engine) on a loopback port and a file in t.TempDir(), and stops it
// when the test ends; Server.Client and Server.NewWorker give a Client and
// a Worker of it. Nothing is mocked: the code under test enqueues over the
// network, the server validates and stores as in production.
//
//	s := conveyortest.Start(t)
//	signup(ctx, s.Client(), "a@example.com") // the code under test
//	conveyortest.RequireEnqueued(t, s, conveyortest.Want{
//		Type:    "email:send",
//		Payload: map[string]any{"to": "a@example.com"},
//	})
//
// RequireEnqueued and RequireNotEnqueued read the server's tasks through
// the AdminService, as an operator would, and compare payloads as JSON
// values. A failure lists the tasks that are there, each with the fields
// in which it differs from what was wanted.
//
// RunTask and RunWorkerTask run a handler on one task synchronously, with
// no server, and return the outcome a Worker would report: SUCCESS with
// the result, RETRY, SKIP_RETRY. They go through the Worker's own code
// (its push-endpoint path, which shares the session's handlers, middleware
// and outcome rules), so a panic, SkipRetry or an oversized result is
// classified as in production.
//
// DrainOnce runs a Worker against the server until every task waiting when
// it was called has been worked, then stops it: an end-to-end test in one
// call.
//
// Unlike package conveyor, which imports none of the server's packages,
// this package imports the server: import it from tests only, where the
// server's code then builds into the test binary alone.
package conveyortest
