// The Worker against a real server: outcomes, JSON and content types,
// progress, concurrency, heartbeats, deadlines, Cancel, drain.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  SkipRetry,
  TaskCanceledError,
  TaskDeadlineError,
  Worker,
  WorkerShutdownError,
  reconnectDelay,
} from "../dist/index.js";
import { startServer } from "./server.mjs";
import { TaskState, clients, deferred, enqueue, text, untilAborted, waitFor, waitState } from "./worker-helpers.mjs";

for (const protocol of ["grpc", "connect"]) {
  describe(`worker outcomes (${protocol})`, () => {
    let server, c, worker, running, sessions;
    const progressSeen = deferred();
    before(async () => {
      server = await startServer();
      c = clients(server.url);
      sessions = [];
      worker = new Worker({ url: server.url, protocol, onSession: (id) => sessions.push(id) });
      worker.handle("echo", ({ task }) => task.payload);
      worker.handle("object", () => ({ ok: true }));
      worker.handle("text", ({ attempt }) => `attempt ${attempt}`);
      worker.handle("fail", () => {
        throw new Error("transient trouble");
      });
      worker.handle("skip", () => {
        throw new SkipRetry("permanent trouble");
      });
      worker.handle("reject", async () => Promise.reject(new TypeError("rejected promise")));
      worker.handleJSON("json", (value) => ({ doubled: value.n * 2 }));
      worker.handle("progress", async ({ progress }) => {
        progress(10, "a tenth");
        progress(20, "a fifth"); // coalesced: the latest value wins
        progress(50, "half");
        await progressSeen.promise;
      });
      running = worker.run();
    });
    after(async () => {
      await worker.stop();
      await running;
      await server.cleanup();
    });

    test("a returned value becomes the result", async () => {
      const id = await enqueue(c.tasks, "echo", "hello bytes");
      const t = await waitState(c.tasks, id, TaskState.COMPLETED);
      assert.equal(text(t.result), "hello bytes");
      const o = await waitState(c.tasks, await enqueue(c.tasks, "object"), TaskState.COMPLETED);
      assert.deepEqual(JSON.parse(text(o.result)), { ok: true });
      const s = await waitState(c.tasks, await enqueue(c.tasks, "text"), TaskState.COMPLETED);
      assert.equal(text(s.result), "attempt 1");
      assert.ok(sessions.length >= 1, "onSession was called on Welcome");
    });

    test("a thrown error retries with its message; SkipRetry archives", async () => {
      const f = await waitState(c.tasks, await enqueue(c.tasks, "fail"), TaskState.RETRY);
      assert.equal(f.retried, 1);
      assert.match(f.lastError, /transient trouble/);
      const r = await waitState(c.tasks, await enqueue(c.tasks, "reject"), TaskState.RETRY);
      assert.match(r.lastError, /rejected promise/);
      const s = await waitState(c.tasks, await enqueue(c.tasks, "skip"), TaskState.ARCHIVED);
      assert.match(s.lastError, /permanent trouble/);
      assert.equal(s.retried, 0);
    });

    test("a type without a handler is not given to the worker: it waits", async () => {
      const nobody = await enqueue(c.tasks, "nobody");
      await waitState(c.tasks, await enqueue(c.tasks, "echo", "after"), TaskState.COMPLETED);
      const t = await c.tasks.getTask({ id: nobody });
      assert.equal(t.state, TaskState.PENDING);
      assert.equal(t.retried, 0);
    });

    test("handleJSON decodes JSON and refuses another content type", async () => {
      const ok = await waitState(c.tasks, await enqueue(c.tasks, "json", '{"n":21}', { contentType: "application/json" }),
        TaskState.COMPLETED);
      assert.deepEqual(JSON.parse(text(ok.result)), { doubled: 42 });
      const bin = await waitState(c.tasks,
        await enqueue(c.tasks, "json", new Uint8Array([1, 2, 3]), { contentType: "application/octet-stream" }),
        TaskState.ARCHIVED);
      assert.match(bin.lastError, /content type "application\/octet-stream"; this handler decodes only application\/json/);
      const bad = await waitState(c.tasks, await enqueue(c.tasks, "json", "{not json"), TaskState.ARCHIVED);
      assert.match(bad.lastError, /decode the JSON payload/);
    });

    test("progress is visible through GetTask, the latest value winning", async () => {
      const id = await enqueue(c.tasks, "progress");
      await waitFor(async () => {
        const t = await c.tasks.getTask({ id });
        return t.progressPercent === 50 && t.progressMessage === "half";
      }, "progress 50 half");
      progressSeen.resolve();
      await waitState(c.tasks, id, TaskState.COMPLETED);
    });
  });
}

describe("worker limits and signals", () => {
  let server, c;
  before(async () => {
    server = await startServer(["--lease-ttl", "2s"]);
    c = clients(server.url);
  });
  after(() => server.cleanup());

  test("concurrency is reached and never exceeded", async () => {
    const release = deferred();
    let active = 0;
    let peak = 0;
    const worker = new Worker({ url: server.url, concurrency: 3 });
    worker.handle("hold", async () => {
      active++;
      peak = Math.max(peak, active);
      await release.promise;
      active--;
    });
    const running = worker.run();
    const ids = [];
    for (let i = 0; i < 7; i++) ids.push(await enqueue(c.tasks, "hold"));
    await waitFor(() => active === 3, "3 handlers running");
    release.resolve();
    for (const id of ids) await waitState(c.tasks, id, TaskState.COMPLETED);
    assert.equal(peak, 3);
    await worker.stop();
    await running;
  });

  test("heartbeats keep a task alive past the lease TTL", async () => {
    let calls = 0;
    const worker = new Worker({ url: server.url });
    worker.handle("long", async () => {
      calls++;
      await new Promise((r) => setTimeout(r, 5_000)); // 2.5 lease TTLs
      return "done";
    });
    const running = worker.run();
    const t = await waitState(c.tasks, await enqueue(c.tasks, "long"), TaskState.COMPLETED, 30_000);
    assert.equal(t.retried, 0);
    assert.equal(calls, 1);
    await worker.stop();
    await running;
  });

  test("the task's timeout aborts its signal and retries it", async () => {
    let reason;
    const worker = new Worker({ url: server.url });
    worker.handle("slow", async ({ signal, deadline }) => {
      assert.ok(deadline instanceof Date);
      reason = await untilAborted(signal);
      throw reason;
    });
    const running = worker.run();
    const id = await enqueue(c.tasks, "slow", "", { options: { timeout: { seconds: 0n, nanos: 300_000_000 } } });
    const t = await waitState(c.tasks, id, TaskState.RETRY);
    assert.ok(reason instanceof TaskDeadlineError, `reason ${reason}`);
    assert.match(t.lastError, /task deadline exceeded/);
    await worker.stop();
    await running;
  });

  test("a deadline weeks away does not abort the task", async () => {
    const worker = new Worker({ url: server.url });
    worker.handle("patient", async ({ signal, deadline }) => {
      assert.ok(deadline.getTime() > Date.now() + 30 * 86_400_000);
      // Long enough for a timer that overflowed (fired at once) to have fired.
      await new Promise((r) => setTimeout(r, 100));
      if (signal.aborted) throw signal.reason;
      return "ok";
    });
    const running = worker.run();
    const seconds = BigInt(Math.floor(Date.now() / 1000) + 40 * 86_400);
    const id = await enqueue(c.tasks, "patient", "", { options: { deadline: { seconds, nanos: 0 } } });
    const t = await waitState(c.tasks, id, TaskState.COMPLETED);
    assert.equal(text(t.result), "ok");
    await worker.stop();
    await running;
  });

  test("CancelTask aborts a running task", async () => {
    const started = deferred();
    let reason;
    const worker = new Worker({ url: server.url });
    worker.handle("cancelme", async ({ signal }) => {
      started.resolve();
      reason = await untilAborted(signal);
      throw reason;
    });
    const running = worker.run();
    const id = await enqueue(c.tasks, "cancelme");
    await started.promise;
    await c.admin.cancelTask({ id });
    await waitFor(() => reason !== undefined, "the handler's signal to abort");
    assert.ok(reason instanceof TaskCanceledError, `reason ${reason}`);
    await waitFor(async () => (await c.tasks.getTask({ id })).state !== TaskState.ACTIVE, "the task to leave ACTIVE");
    await worker.stop();
    await running;
  });

  test("a drain releases what did not finish, with retried unchanged", async () => {
    const started = deferred();
    let reason;
    const worker = new Worker({ url: server.url, drainTimeoutMs: 200 });
    worker.handle("stubborn", async ({ signal }) => {
      started.resolve();
      reason = await untilAborted(signal);
      throw new Error("gave up: " + reason.message);
    });
    worker.handle("quick", () => "finished");
    const running = worker.run();
    const id = await enqueue(c.tasks, "stubborn");
    await started.promise;
    await worker.stop();
    await running;
    assert.ok(reason instanceof WorkerShutdownError, `reason ${reason}`);
    const t = await c.tasks.getTask({ id });
    assert.equal(t.state, TaskState.PENDING);
    assert.equal(t.retried, 0);
  });
});

test("reconnectDelay is full jitter under min(max, base*2^n)", () => {
  for (let n = 0; n < 12; n++) {
    for (let i = 0; i < 50; i++) {
      const d = reconnectDelay(n, 500, 30_000);
      assert.ok(d >= 0 && d < Math.min(30_000, 500 * 2 ** n), `delay ${d} for attempt ${n}`);
    }
  }
});

test("bad options are refused with a message naming them", () => {
  assert.throws(() => new Worker({ url: "http://127.0.0.1:1", queues: { "a b": 1 } }), /queue name "a b" must match/);
  assert.throws(() => new Worker({ url: "http://127.0.0.1:1", queues: { ["q".repeat(1025)]: 1 } }), /at most 1024 bytes/);
  assert.throws(() => new Worker({ url: "http://127.0.0.1:1", queues: { q: 0 } }), /weight of queue "q" must be a positive integer/);
  assert.throws(() => new Worker({ url: "http://127.0.0.1:1", concurrency: 0 }), /concurrency must be a positive integer/);
  assert.throws(() => new Worker({ url: "ftp://x" }), /must start with http/);
  assert.throws(() => new Worker({ url: "http://127.0.0.1:1", drainTimeoutMs: 2 ** 31 }), /drainTimeoutMs must be between 0 and/);
});
