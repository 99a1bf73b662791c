// A task's Deadline option is a time on the server's clock. A worker whose
// clock is an hour ahead of the server's (a fake peer plays that server)
// reckons the deadline from the dispatch (ServerClock), so the task runs
// with the time it has left; one that arrives before the session has
// learned the difference, and so looks past its deadline, is failed
// (RETRY), never given back to come straight back.
import assert from "node:assert/strict";
import { test } from "node:test";
import { TaskOutcome, Worker } from "../dist/index.js";
import { fakeServer, scripted } from "./fake-peer.mjs";
import { deferred } from "./worker-helpers.mjs";

const hour = 3_600_000;
const leaseTtlMs = 30_000;
/** serverNow is the fake server's clock: an hour behind this process's. */
const serverNow = () => Date.now() - hour;
const welcome = { sessionId: "S1", leaseTtl: { seconds: BigInt(leaseTtlMs / 1000) } };
const ts = (ms) => ({ seconds: BigInt(Math.floor(ms / 1000)), nanos: (ms % 1000) * 1e6 });

/** dispatch is a Dispatch of task id as the server sends it: its deadline the earliest of the lease's expiry and the task's own. */
function dispatch(id, ownDeadline) {
  const now = serverNow();
  const deadline = Math.min(now + leaseTtlMs, ownDeadline ?? Infinity);
  const options = ownDeadline === undefined ? undefined : { deadline: ts(ownDeadline) };
  return {
    frame: {
      case: "dispatch",
      value: { attemptId: `A-${id}`, deadline: ts(deadline), task: { id, type: "t", attemptId: `A-${id}`, options } },
    },
  };
}

test("a Deadline option is reckoned by the server's clock, learned from an earlier dispatch", async (t) => {
  const results = deferred();
  let seen;
  const fake = await fakeServer(
    scripted(welcome, [[[dispatch("plain")], 1], [[dispatch("own", serverNow() + 5_000)], 2]], results),
  );
  t.after(() => fake.close());
  const worker = new Worker({ url: fake.url, queues: { q: 1 }, concurrency: 1, drainTimeoutMs: 0 });
  worker.handle("t", ({ task, signal, deadline }) => {
    if (task.id === "own") seen = { aborted: signal.aborted, left: deadline.getTime() - Date.now() };
  });
  const running = worker.run();
  const got = await results.promise;
  await worker.stop();
  await running;
  assert.deepEqual(got.map((r) => [r.taskId, r.outcome]), [["plain", TaskOutcome.SUCCESS], ["own", TaskOutcome.SUCCESS]]);
  assert.equal(seen.aborted, false);
  assert.ok(seen.left > 3_000 && seen.left <= 5_000, `the handler had ${seen.left} ms left, want about 5000`);
});

test("a task past its deadline on arrival by the worker's clock is failed, not given back", async (t) => {
  const results = deferred();
  const release = deferred();
  const fake = await fakeServer(
    // Every deadline set by an option: the worker learns no difference.
    // "own" waits for the slot "busy" holds, its bound already passed: it
    // is answered at once, unstarted; then "busy" is let go.
    scripted(welcome, [
      [[dispatch("busy", serverNow() + 20_000), dispatch("own", serverNow() + 5_000)], 1, () => release.resolve()],
      [[], 2],
    ], results),
  );
  t.after(() => fake.close());
  const worker = new Worker({ url: fake.url, queues: { q: 1 }, concurrency: 1, drainTimeoutMs: 0 });
  worker.handle("t", async ({ task }) => {
    if (task.id === "busy") await release.promise;
  });
  const running = worker.run();
  const got = await results.promise;
  await worker.stop();
  await running;
  assert.deepEqual(got.map((r) => r.taskId), ["own", "busy"]);
  const own = got.find((r) => r.taskId === "own");
  assert.equal(own.outcome, TaskOutcome.RETRY);
  assert.match(own.errorMsg, /deadline had passed by this worker's clock when it arrived/);
});
