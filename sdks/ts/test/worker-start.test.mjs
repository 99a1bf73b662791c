// Routing and start authorization on the wire, against a scripted peer
// (fake-peer.mjs): what the Hello declares, and the Start / StartDecision
// exchange of an at-most-once task (Dispatch.start_required) in each way
// it can end: authorized, refused, canceled, the stream lost, a drain.
import assert from "node:assert/strict";
import { test } from "node:test";
import { RELEASE_ID_ENV, TaskOutcome, Worker } from "../dist/index.js";
import { heartbeatFor, heartbeatWithout, resultFor, startPeer } from "./fake-peer.mjs";
import { deferred, text, waitFor } from "./worker-helpers.mjs";

const enc = new TextEncoder();

/** dispatch is a Dispatch frame of one task. */
function dispatch(taskId, attemptId, { type = "once", startRequired = true, options } = {}) {
  return {
    case: "dispatch",
    value: { attemptId, startRequired, task: { id: taskId, type, attemptId, payload: enc.encode(taskId), options } },
  };
}

const decision = (attemptId, authorized, reason = "") => ({
  case: "startDecision",
  value: { attemptId, authorized, reason },
});

const isStart = (attempt) => (f) => f.case === "start" && f.value.attemptId === attempt;

/** setup starts a peer and a worker of it that records its runs and its log. */
async function setup(t, opts = {}) {
  const peer = await startPeer();
  const runs = [];
  const logs = [];
  const log = (level) => (msg, attrs) => logs.push({ level, msg, attrs });
  const worker = new Worker({
    url: peer.url,
    concurrency: 1,
    reconnectBaseMs: 60_000,
    logger: { debug: log("debug"), info: log("info"), warn: log("warn") },
    ...opts,
  });
  worker.handle("once", ({ task }) => {
    runs.push(task.id);
    return task.payload;
  });
  const running = worker.run();
  t.after(async () => {
    await worker.stop();
    await running;
    await peer.close();
  });
  const s = await peer.next();
  s.welcome();
  return { peer, s, worker, runs, logs, running };
}

for (const protocol of ["grpc", "connect"]) {
  test(`Hello declares the handled types, the release and start authorization (${protocol})`, async (t) => {
    const peer = await startPeer();
    const worker = new Worker({ url: peer.url, protocol, releaseId: "r-7", reconnectBaseMs: 60_000 });
    worker.handle("b", () => {});
    worker.handleJSON("a", () => {});
    worker.handleBatch("c", () => {});
    worker.handleBatch("a", () => {});
    worker.handle("b", () => {}); // replaced, listed once
    const running = worker.run();
    t.after(async () => {
      await worker.stop();
      await running;
      await peer.close();
    });
    const s = await peer.next();
    const hello = s.hello.value;
    assert.equal(s.hello.case, "hello");
    assert.deepEqual(hello.types, ["a", "b", "c"]);
    assert.deepEqual(hello.batchTypes, ["a", "c"]);
    assert.equal(hello.releaseId, "r-7");
    assert.equal(hello.startAuthorization, true);
  });
}

test("the release id defaults to CONVEYOR_RELEASE_ID; an empty option means none", async (t) => {
  const peer = await startPeer();
  t.after(() => peer.close());
  const before = process.env[RELEASE_ID_ENV];
  process.env[RELEASE_ID_ENV] = "from-env";
  let fromEnv;
  let none;
  try {
    fromEnv = new Worker({ url: peer.url, reconnectBaseMs: 60_000 });
    none = new Worker({ url: peer.url, releaseId: "", reconnectBaseMs: 60_000 });
  } finally {
    if (before === undefined) delete process.env[RELEASE_ID_ENV];
    else process.env[RELEASE_ID_ENV] = before;
  }
  for (const [worker, want] of [[fromEnv, "from-env"], [none, ""]]) {
    const running = worker.run();
    const s = await peer.next();
    assert.equal(s.hello.value.releaseId, want);
    assert.deepEqual(s.hello.value.types, [], "no handler: no types (every type)");
    await worker.stop();
    await running;
  }
});

test("a start_required task runs only after an authorized StartDecision, listed in heartbeats meanwhile", async (t) => {
  const { s, runs, logs } = await setup(t);
  s.send(dispatch("T1", "A1"));
  await s.until(isStart("A1"), "Start A1");
  await s.until(heartbeatFor("A1"), "a heartbeat listing A1 while it waits");
  const hb = s.frames("heartbeat").find((h) => h.activeAttemptIds.includes("A1"));
  assert.deepEqual(hb.activeTaskIds, ["T1"]);
  assert.deepEqual(runs, [], "not run before the decision");

  // A decision for an attempt the worker does not hold is ignored.
  s.send(decision("A-other", true));
  s.send(decision("A1", true));
  const r = await s.until(resultFor("T1"), "T1's Result");
  assert.equal(r.value.attemptId, "A1");
  assert.equal(r.value.outcome, TaskOutcome.SUCCESS);
  assert.equal(text(r.value.result), "T1");
  assert.deepEqual(runs, ["T1"]);
  assert.ok(logs.some((l) => l.level === "debug" && l.attrs?.attempt === "A-other"), JSON.stringify(logs));
  assert.equal(s.frames("start").length, 1, "one Start");
});

test("a task without start_required runs at once, with no Start", async (t) => {
  const { s, runs } = await setup(t);
  s.send(dispatch("T1", "A1", { startRequired: false }));
  const r = await s.until(resultFor("T1"), "T1's Result");
  assert.equal(r.value.outcome, TaskOutcome.SUCCESS);
  assert.deepEqual(runs, ["T1"]);
  assert.deepEqual(s.frames("start"), []);
});

test("a dispatch of a type with no handler (from a server older than routing) retries, saying so", async (t) => {
  const { s, runs } = await setup(t);
  s.send(dispatch("T1", "A1", { type: "nobody", startRequired: false }));
  const r = await s.until(resultFor("T1"), "T1's Result");
  assert.equal(r.value.outcome, TaskOutcome.RETRY);
  assert.match(r.value.errorMsg, /no handler for task type "nobody"/);
  assert.deepEqual(runs, []);
});

test("a refused start is not run, gets no Result, leaves the heartbeats and frees its slot", async (t) => {
  const { s, runs, logs } = await setup(t);
  s.send(dispatch("T1", "A1"));
  await s.until(isStart("A1"), "Start A1");
  const at = s.mark();
  s.send(decision("A1", false, "the lease lapsed"));
  // Frames are handled in order: a heartbeat after the refusal that no
  // longer lists A1 comes after the worker acted on it.
  await s.until(heartbeatWithout("A1"), "a heartbeat without A1", at);
  assert.deepEqual(runs, []);
  assert.deepEqual(s.frames("result"), []);
  const warn = logs.find((l) => l.level === "warn" && l.attrs?.attempt === "A1");
  assert.equal(warn?.attrs.reason, "the lease lapsed");

  // Its slot (concurrency 1) is free again.
  s.send(dispatch("T2", "A2", { startRequired: false }));
  await s.until(resultFor("T2"), "T2's Result");
  assert.deepEqual(runs, ["T2"]);
  assert.deepEqual(s.frames("result").map((r) => r.taskId), ["T2"]);
});

test("a Cancel before the decision answers RELEASED and the task never runs", async (t) => {
  const { s, runs } = await setup(t);
  s.send(dispatch("T1", "A1"));
  await s.until(isStart("A1"), "Start A1");
  s.send({ case: "cancel", value: { taskId: "T1" } });
  const r = await s.until(resultFor("T1"), "T1's Result");
  assert.equal(r.value.attemptId, "A1");
  assert.equal(r.value.outcome, TaskOutcome.RELEASED);
  // A decision arriving after it is for an attempt no longer held.
  s.send(decision("A1", true));
  s.send(dispatch("T2", "A2", { startRequired: false }));
  await s.until(resultFor("T2"), "T2's Result");
  assert.deepEqual(runs, ["T2"]);
  assert.equal(s.frames("result").filter((x) => x.taskId === "T1").length, 1);
});

test("a task whose own timeout passes while it waits for the decision is RELEASED unrun", async (t) => {
  const { s, runs } = await setup(t);
  s.send(dispatch("T1", "A1", { options: { timeout: { nanos: 100_000_000 } } }));
  await s.until(isStart("A1"), "Start A1");
  const r = await s.until(resultFor("T1"), "T1's Result");
  assert.equal(r.value.outcome, TaskOutcome.RELEASED);
  assert.deepEqual(runs, []);
});

test("a stream lost before the decision: not run, and a decision on the next session is ignored", async (t) => {
  const { peer, s, runs, logs } = await setup(t, { reconnectBaseMs: 10, reconnectMaxMs: 20 });
  s.send(dispatch("T1", "A1"));
  await s.until(isStart("A1"), "Start A1");
  s.end("the server went away");
  const s2 = await peer.next();
  s2.welcome("S2");
  s2.send(decision("A1", true));
  s2.send(dispatch("T2", "A2", { startRequired: false }));
  await s2.until(resultFor("T2"), "T2's Result");
  assert.deepEqual(runs, ["T2"]);
  assert.deepEqual(s2.frames("result").map((r) => r.taskId), ["T2"]);
  assert.ok(logs.some((l) => l.level === "debug" && l.attrs?.attempt === "A1"));
});

test("a start_required dispatch during a drain sends no Start and is given back by the close", async (t) => {
  const { s, worker, runs, running } = await setup(t, { concurrency: 2 });
  const hold = deferred();
  const held = deferred();
  worker.handle("hold", async () => {
    held.resolve();
    await hold.promise;
  });
  s.send(dispatch("T0", "A0", { type: "hold", startRequired: false }));
  await held.promise;
  const stopped = worker.stop(); // draining at once: T0 keeps running
  s.send(dispatch("T1", "A1"));
  await s.until(heartbeatFor("A1"), "a heartbeat listing the parked A1");
  hold.resolve();
  await stopped;
  await running;
  await s.requestEnded;
  assert.deepEqual(s.frames("start"), [], "no Start in a drain");
  assert.deepEqual(s.frames("result").map((r) => r.taskId), ["T0"], "T1 gets no Result: the close releases it");
  assert.deepEqual(runs, []);
});

test("a start authorized during a drain runs: the server has committed it", async (t) => {
  const { s, worker, runs, running } = await setup(t);
  s.send(dispatch("T1", "A1"));
  await s.until(isStart("A1"), "Start A1");
  const stopped = worker.stop(); // draining at once: the decision comes in the drain
  s.send(decision("A1", true));
  await stopped;
  await running;
  const r = await s.until(resultFor("T1"), "T1's Result");
  assert.equal(r.value.outcome, TaskOutcome.SUCCESS);
  assert.deepEqual(runs, ["T1"]);
});

test("a drain whose timeout passes while a start is pending answers it RELEASED: a later decision does not run it", async (t) => {
  const { s, worker, runs, logs, running } = await setup(t, { drainTimeoutMs: 100 });
  s.send(dispatch("T1", "A1"));
  await s.until(isStart("A1"), "Start A1");
  const stopped = worker.stop();
  await waitFor(() => logs.some((l) => l.msg.startsWith("drain timeout over")), "the drain timeout");
  s.send(decision("A1", true)); // too late: answered already (or the stream is gone)
  await stopped;
  await running;
  await s.requestEnded;
  assert.deepEqual(runs, []);
  const rs = s.frames("result");
  assert.equal(rs.length, 1, "one Result");
  assert.equal(rs[0].outcome, TaskOutcome.RELEASED);
  assert.match(rs[0].errorMsg, /before its start was authorized/);
});
