// The Worker's sessions against a real server: reconnecting after a
// restart, a fatal bad token, batches of a fired group.
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { test } from "node:test";
import { SkipRetry, UnauthenticatedError, Worker } from "../dist/index.js";
import { startServer } from "./server.mjs";
import { TaskState, clients, enqueue, text, waitFor, waitState } from "./worker-helpers.mjs";

for (const protocol of ["grpc", "connect"]) {
  test(`the worker reconnects after a server restart (${protocol})`, async () => {
    let server = await startServer();
    const { dataDir, listen } = server;
    const sessions = [];
    const worker = new Worker({ url: server.url, protocol, reconnectMaxMs: 1_000, onSession: (id) => sessions.push(id) });
    worker.handle("echo", ({ task }) => task.payload);
    const running = worker.run();
    try {
      let c = clients(server.url);
      await waitState(c.tasks, await enqueue(c.tasks, "echo", "before"), TaskState.COMPLETED);
      await server.stop();
      server = await startServer([], { dataDir, listen });
      c = clients(server.url);
      const t = await waitState(c.tasks, await enqueue(c.tasks, "echo", "after"), TaskState.COMPLETED, 30_000);
      assert.equal(text(t.result), "after");
      assert.ok(sessions.length >= 2, `sessions ${sessions}`);
      assert.notEqual(sessions[0], sessions.at(-1));
    } finally {
      await worker.stop();
      await running;
      await server.stop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
}

test("a wrong token rejects run() with UnauthenticatedError, without reconnecting", async () => {
  const server = await startServer(["--token", "right-token"]);
  try {
    let sessions = 0;
    const worker = new Worker({ url: server.url, token: "wrong-token", onSession: () => sessions++ });
    worker.handle("echo", ({ task }) => task.payload);
    await assert.rejects(worker.run(), (err) => err instanceof UnauthenticatedError);
    assert.equal(sessions, 0);
  } finally {
    await server.cleanup();
  }
});

for (const protocol of ["grpc", "connect"]) {
  test(`a batch handler gets a fired group in one call, one result per member (${protocol})`, async () => {
    const server = await startServer();
    const c = clients(server.url);
    const calls = [];
    const worker = new Worker({ url: server.url, protocol });
    worker.handleBatch("agg", (batch) => {
      calls.push({ group: batch.group, ids: batch.tasks.map((t) => t.id) });
      const bad = batch.tasks.findIndex((t) => text(t.payload) === "bad");
      if (bad >= 0) batch.fail(bad, new SkipRetry("member refused"));
      return batch.tasks.map((t) => `seen ${text(t.payload)}`);
    });
    const running = worker.run();
    try {
      await c.admin.updateQueueConfig({
        config: { queue: "default", groupPolicy: { maxSize: 3 } },
        updateMask: { paths: ["group_policy.max_size"] },
      });
      const ids = [];
      for (const p of ["a", "b", "bad"]) ids.push(await enqueue(c.tasks, "agg", p, { options: { group: "g1" } }));
      const a = await waitState(c.tasks, ids[0], TaskState.COMPLETED);
      const b = await waitState(c.tasks, ids[1], TaskState.COMPLETED);
      const bad = await waitState(c.tasks, ids[2], TaskState.ARCHIVED);
      assert.equal(text(a.result), "seen a");
      assert.equal(text(b.result), "seen b");
      assert.match(bad.lastError, /member refused/);
      const batchCall = calls.find((x) => x.group === "g1");
      assert.deepEqual(batchCall?.ids.slice().sort(), ids.slice().sort());

      // A single delivery of a batch type is a batch of one.
      const single = await enqueue(c.tasks, "agg", "alone");
      const s = await waitState(c.tasks, single, TaskState.COMPLETED);
      assert.equal(text(s.result), "seen alone");
      assert.ok(calls.some((x) => x.group === "" && x.ids.length === 1 && x.ids[0] === single));
    } finally {
      await worker.stop();
      await running;
      await server.cleanup();
    }
  });
}

test("a dispatch arriving during a drain is held, not started, and given back", async () => {
  const server = await startServer();
  const c = clients(server.url);
  let startedLate = false;
  let release;
  const first = new Promise((r) => (release = r));
  const worker = new Worker({ url: server.url, concurrency: 2, drainTimeoutMs: 60_000 });
  let running1 = 0;
  worker.handle("hold", async () => {
    running1++;
    await first;
  });
  worker.handle("late", () => {
    startedLate = true;
  });
  const running = worker.run();
  try {
    const held = await enqueue(c.tasks, "hold");
    await waitFor(() => running1 === 1, "the first task to start");
    const stopped = worker.stop(); // draining: the held task keeps running
    const late = await enqueue(c.tasks, "late"); // dispatched to the draining session
    await waitFor(async () => (await c.tasks.getTask({ id: late })).state === TaskState.ACTIVE, "the late task dispatched");
    release();
    await stopped;
    await running;
    assert.equal(startedLate, false);
    await waitState(c.tasks, held, TaskState.COMPLETED);
    const t = await c.tasks.getTask({ id: late });
    assert.equal(t.state, TaskState.PENDING);
    assert.equal(t.retried, 0);
  } finally {
    await worker.stop();
    await server.cleanup();
  }
});
