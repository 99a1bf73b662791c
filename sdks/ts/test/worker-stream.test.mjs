// The Worker's session on its own HTTP/2 stream (src/session_stream.ts):
// frames written together and parsed as their bytes arrive. Against a real
// server: many Results in flight at once, and a 1 MiB payload and result,
// in both protocols. Against a raw HTTP/2 peer: frames cut into single
// bytes, several frames in one write, a compressed frame refused, and a
// task stopped when the stalled stream let no heartbeat out in time.
import assert from "node:assert/strict";
import http2 from "node:http2";
import { test } from "node:test";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { LeaseLapsedError, ServerMessageSchema, TaskState, Worker, WorkerMessageSchema } from "../dist/index.js";
import { startServer } from "./server.mjs";
import { clients, enqueue, runWorker, text, waitFor, waitState } from "./worker-helpers.mjs";

for (const protocol of ["grpc", "connect"]) {
  test(`thousands of Results in flight, each for its own task (${protocol})`, async (t) => {
    const server = await startServer();
    t.after(() => server.cleanup());
    const { tasks, admin } = clients(server.url);
    const n = 3000;
    const items = [];
    for (let i = 0; i < n; i++) items.push({ queue: "many", type: "echo", payload: new TextEncoder().encode(`p${i}`) });
    for (let i = 0; i < n; i += 1000) await tasks.enqueueBatch({ items: items.slice(i, i + 1000) });
    const calls = new Map();
    const worker = new Worker({ url: server.url, protocol, queues: { many: 1 }, concurrency: 64 });
    worker.handle("echo", ({ task }) => {
      calls.set(task.id, (calls.get(task.id) ?? 0) + 1);
      return new TextEncoder().encode(`r:${text(task.payload)}`);
    });
    runWorker(t, worker);
    const q = await waitFor(async () => {
      const { queues } = await admin.listQueues({});
      const q = queues.find((x) => x.name === "many");
      return q && q.pending === 0n && q.active === 0n && q.completed === BigInt(n) ? q : undefined;
    }, `${n} tasks completed`, 60_000);
    assert.equal(q.retry, 0n, "no Result was lost or failed");
    assert.equal(calls.size, n);
    assert.ok([...calls.values()].every((c) => c === 1), "each task ran once");
    const { tasks: done } = await admin.listTasks({ queue: "many", state: TaskState.COMPLETED, pageSize: 200 });
    assert.equal(done.length, 200);
    for (const info of done) {
      assert.equal(text(info.result), `r:${text(info.payload)}`, `task ${info.id}'s own result`);
    }
  });

  test(`a 1 MiB payload and a 1 MiB result cross whole (${protocol})`, async (t) => {
    const server = await startServer();
    t.after(() => server.cleanup());
    const { tasks } = clients(server.url);
    const payload = new Uint8Array(1 << 20);
    for (let i = 0; i < payload.length; i++) payload[i] = (i * 31 + 7) & 0xff;
    const id = await enqueue(tasks, "big", payload, { queue: "big" });
    let seen;
    const worker = new Worker({ url: server.url, protocol, queues: { big: 1 } });
    worker.handle("big", ({ task }) => {
      seen = task.payload;
      return task.payload.map((b) => b ^ 0xff);
    });
    runWorker(t, worker);
    const info = await waitState(tasks, id, TaskState.COMPLETED);
    assert.deepEqual(seen, payload);
    assert.deepEqual(info.result, payload.map((b) => b ^ 0xff));
  });
}

/** envelope frames one message as the gRPC protocol does. */
function envelope(schema, init, flags = 0) {
  const body = toBinary(schema, create(schema, init));
  const out = new Uint8Array(5 + body.length);
  out[0] = flags;
  new DataView(out.buffer).setUint32(1, body.length);
  out.set(body, 5);
  return out;
}

/**
 * rawPeer serves Session with the gRPC protocol on a bare node:http2
 * server: onSession(stream, frames) writes what it likes and reads the
 * worker's frames (next(case) waits for the next one and checks its
 * case). Stop the worker before the test ends: the peer closes after it.
 */
async function rawPeer(t, onSession) {
  const server = http2.createServer();
  const conns = new Set();
  server.on("session", (s) => {
    conns.add(s);
    s.once("close", () => conns.delete(s));
  });
  let calls = 0;
  server.on("stream", (stream, headers) => {
    assert.equal(headers[":path"], "/conveyor.v1.WorkerService/Session");
    assert.equal(headers["content-type"], "application/grpc+proto");
    stream.respond({ ":status": 200, "content-type": "application/grpc+proto" }, { waitForTrailers: true });
    stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }));
    const frames = [];
    let wake;
    let buf = Buffer.alloc(0);
    stream.on("data", (chunk) => {
      buf = Buffer.concat([buf, chunk]);
      while (buf.length >= 5 && buf.length >= 5 + buf.readUInt32BE(1)) {
        const n = buf.readUInt32BE(1);
        frames.push(fromBinary(WorkerMessageSchema, buf.subarray(5, 5 + n)).frame);
        buf = buf.subarray(5 + n);
      }
      wake?.();
    });
    // The worker closed its side (a drain): end the call as a server does.
    stream.on("end", () => stream.end());
    const next = async (what) => {
      while (frames.length === 0) await new Promise((r) => (wake = r));
      const f = frames.shift();
      assert.equal(f.case, what);
      return f.value;
    };
    onSession(stream, next, ++calls).catch((err) => stream.destroy(err));
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.after(
    () =>
      new Promise((resolve) => {
        server.close(resolve);
        for (const s of conns) s.destroy();
      }),
  );
  return `http://127.0.0.1:${server.address().port}`;
}

const welcome = { frame: { case: "welcome", value: { sessionId: "S1", heartbeatInterval: { seconds: 60n } } } };
const dispatch = (id) => ({
  frame: { case: "dispatch", value: { attemptId: `A-${id}`, task: { id, type: "echo", payload: new TextEncoder().encode(id), attemptId: `A-${id}` } } },
});

/** writeSlowly writes bytes in pieces of size, each in a write of its own. */
async function writeSlowly(stream, bytes, size = 1) {
  for (let i = 0; i < bytes.length; i += size) {
    await new Promise((resolve) => stream.write(bytes.subarray(i, i + size), resolve));
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/** within rejects if p has not settled after ms. */
function within(p, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

/** envelopes frames the dispatches of ids one after the other. */
const envelopes = (ids) => Buffer.concat(ids.map((id) => envelope(ServerMessageSchema, dispatch(id))));

test("frames cut into single bytes, cut across their bounds, and several in one write are read whole", async (t) => {
  const results = [];
  let done;
  const allDone = new Promise((resolve) => (done = resolve));
  let sessions = 0;
  const url = await rawPeer(t, async (stream, next, n) => {
    sessions = n;
    if (n > 1) return done(); // the first session broke: a frame was misread
    const hello = await next("hello");
    assert.deepEqual(hello.queues, { q: 1 });
    await writeSlowly(stream, envelope(ServerMessageSchema, welcome));
    await writeSlowly(stream, envelope(ServerMessageSchema, dispatch("T1")));
    await writeSlowly(stream, envelopes(["T2", "T3", "T4"]), 6); // 35 bytes each: cuts inside and across
    stream.write(envelopes(["T5", "T6", "T7"]));
    for (let i = 0; i < 7; i++) results.push(await next("result"));
    done();
  });
  const worker = new Worker({ url, queues: { q: 1 }, concurrency: 8 });
  worker.handle("echo", ({ task }) => task.payload);
  const running = worker.run();
  await within(allDone, 20_000, "seven Results");
  await worker.stop();
  await running;
  assert.equal(sessions, 1, "one session served every frame");
  const byTask = Object.fromEntries(results.map((r) => [r.taskId, [r.attemptId, text(r.result)]]));
  assert.deepEqual(byTask, {
    T1: ["A-T1", "T1"],
    T2: ["A-T2", "T2"],
    T3: ["A-T3", "T3"],
    T4: ["A-T4", "T4"],
    T5: ["A-T5", "T5"],
    T6: ["A-T6", "T6"],
    T7: ["A-T7", "T7"],
  });
});

test("a compressed frame, which the worker never accepted, ends the session and the worker reconnects", async (t) => {
  let second;
  const reconnected = new Promise((resolve) => (second = resolve));
  const url = await rawPeer(t, async (stream, next, n) => {
    await next("hello");
    if (n === 1) {
      stream.write(envelope(ServerMessageSchema, welcome, 1));
      return;
    }
    second();
  });
  const errors = [];
  const worker = new Worker({
    url,
    queues: { q: 1 },
    reconnectBaseMs: 1,
    logger: { warn: (msg, attrs) => errors.push(attrs?.err ?? msg), info() {}, debug() {}, error() {} },
  });
  const running = worker.run();
  await reconnected;
  await worker.stop();
  await running;
  assert.match(errors[0] ?? "", /compressed message/);
});

test("a task whose heartbeats cannot be written is stopped once its lease lapses", async (t) => {
  let reason;
  let stopped;
  const lapsed = new Promise((resolve) => (stopped = resolve));
  const url = await rawPeer(t, async (stream, next) => {
    await next("hello");
    stream.pause(); // read nothing more: the worker's writes stall once the window is full
    const frames = [
      { frame: { case: "welcome", value: { sessionId: "S1", leaseTtl: { nanos: 600_000_000 }, heartbeatInterval: { nanos: 100_000_000 } } } },
      dispatch("slow"),
      { frame: { case: "dispatch", value: { attemptId: "A-big", task: { id: "big", type: "big", attemptId: "A-big" } } } },
    ];
    stream.write(Buffer.concat(frames.map((f) => envelope(ServerMessageSchema, f))));
  });
  const worker = new Worker({ url, queues: { q: 1 }, concurrency: 2, drainTimeoutMs: 0 });
  worker.handle("echo", ({ signal }) =>
    new Promise((_, reject) => {
      signal.addEventListener("abort", () => {
        reason = signal.reason;
        stopped();
        reject(signal.reason);
      });
    }),
  );
  // A result larger than the stream's flow-control window: its write, and every heartbeat behind it, never completes.
  worker.handle("big", () => new Uint8Array(256 << 10));
  const running = worker.run();
  await within(lapsed, 20_000, "the lapsed task's signal");
  await worker.stop();
  await running;
  assert.ok(reason instanceof LeaseLapsedError, `aborted with ${reason}`);
});
