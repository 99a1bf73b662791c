// Package conformance is the cross-SDK conformance suite: the executable
// form of the protocol's §9 and of its §5 worker rules (see
// docs/sdks.md). For each SDK it runs that SDK's conformance worker
// (CONTRACT.md, "SDK conformance worker") as a child process, against a
// real server for end-to-end outcomes and against a misbehaving fake
// WorkerService of its own (Fake) for the exact frames, their timing and
// what a real server cannot provoke (a Ping storm, a cut stream, a refused
// session).
//
// The package holds the harness (SDK, Proc, Fake); the checks are in
// suite_test.go. Run it with
//
//	go test -race ./conformance
//
// and against another SDK's worker with CONVEYOR_CONFORMANCE_WORKER set to
// its command line.
package conformance
