// enqueueBatch, enqueueTx and the gathering of concurrent enqueue calls,
// against a real server. RPCs are counted by a proxy in front of it, not
// by the client under test.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import {
  AlreadyExistsError,
  CanceledError,
  Client,
  DeadlineExceededError,
  InvalidArgumentError,
  NotFoundError,
} from "../dist/index.js";
import { startCountingProxy } from "./client_proxy.mjs";
import { startServer } from "./server.mjs";
import { rejects, ulid } from "./client-helpers.mjs";
import { waitFor } from "./worker-helpers.mjs";

const ENQUEUE = "/conveyor.v1.TaskService/Enqueue";
const BATCH = "/conveyor.v1.TaskService/EnqueueBatch";

let server;
before(async () => {
  server = await startServer();
});
after(async () => {
  await server?.cleanup();
});


const bytes = (s) => new TextEncoder().encode(s);
const MISSING = "01J00000000000000000000000";

for (const protocol of ["grpc", "connect"]) {
  test(`enqueueBatch types each item's error (${protocol})`, async () => {
    const c = new Client({ url: server.url, protocol });
    const taken = (await c.enqueue("t")).id;
    const results = await c.enqueueBatch([
      { type: "ok", payload: bytes("p"), options: { metadata: { a: "b" }, priority: 2 } },
      { type: "dup", options: { taskId: taken } },
      { type: "dep", options: { dependsOn: [{ taskId: MISSING }] } },
      { type: "bad", options: { priority: 10 } },
      { type: "ok2" },
    ]);
    assert.equal(results.length, 5);
    const ok = results[0].task;
    assert.ok(ok, `${results[0].error}`);
    assert.deepEqual(ok.payload, bytes("p"), "the brief answer is filled from the request");
    assert.deepEqual(ok.metadata, { a: "b" });
    assert.equal(ok.options?.priority, 2);
    assert.equal((await c.getTask(ok.id)).priority, 2);
    assert.ok(results[1].error instanceof AlreadyExistsError, `${results[1].error}`);
    assert.equal(results[1].error.code, "already_exists");
    assert.ok(results[2].error instanceof InvalidArgumentError, `${results[2].error}`);
    assert.match(results[2].error.message, /depends_on/);
    assert.ok(results[3].error instanceof InvalidArgumentError, `${results[3].error}`);
    assert.match(results[3].error.message, /priority/);
    assert.ok(results[4].task, `${results[4].error}`);
    await c.getTask(results[4].task.id);

    for (const items of [[], Array.from({ length: 1001 }, () => ({ type: "t" }))]) {
      const err = await rejects(c.enqueueBatch(items));
      assert.ok(err instanceof InvalidArgumentError, `${err}`);
      assert.match(err.message, /1\.\.1000 items, got/);
    }
    await c.close();
  });

  test(`enqueueTx is atomic (${protocol})`, async () => {
    const c = new Client({ url: server.url, protocol });
    const a = ulid();
    const b = ulid();
    const err = await rejects(
      c.enqueueTx([
        { type: "t", options: { taskId: a } },
        { type: "t", options: { dependsOn: [{ taskId: MISSING }] } },
        { type: "t", options: { taskId: b } },
      ]),
    );
    assert.ok(err instanceof InvalidArgumentError, `${err}`);
    for (const id of [a, b]) assert.ok((await rejects(c.getTask(id))) instanceof NotFoundError, "nothing committed");

    const local = await rejects(c.enqueueTx([{ type: "t", options: { taskId: a } }, { type: "t", options: { priority: 11 } }]));
    assert.ok(local instanceof InvalidArgumentError, `${local}`);
    assert.match(local.message, /items\[1\]: priority/);
    assert.ok((await rejects(c.getTask(a))) instanceof NotFoundError);

    const tasks = await c.enqueueTx([
      { type: "x", options: { taskId: a } },
      { type: "y", options: { taskId: b } },
    ]);
    assert.deepEqual(
      tasks.map((t) => [t.id, t.type]),
      [
        [a, "x"],
        [b, "y"],
      ],
    );
    await c.close();
  });

  test(`concurrent enqueues are gathered into fewer RPCs (${protocol})`, async () => {
    const proxy = await startCountingProxy(server.url);
    try {
      const c = new Client({ url: proxy.url, protocol });
      const n = 500;
      const infos = await Promise.all(Array.from({ length: n }, (_, i) => c.enqueueJSON("gather", { i }, { queue: "gather" })));
      assert.equal(new Set(infos.map((t) => t.id)).size, n);
      for (const [i, t] of infos.entries()) {
        const got = await c.getTask(t.id);
        assert.equal(new TextDecoder().decode(got.payload), JSON.stringify({ i }));
      }
      const rpcs = proxy.count(ENQUEUE) + proxy.count(BATCH);
      assert.ok(proxy.count(BATCH) >= 1, "an EnqueueBatch was sent");
      assert.ok(rpcs < n / 10, `${rpcs} RPCs for ${n} calls`);
      assert.deepEqual(c.stats(), { enqueueCalls: n, enqueueRpcs: rpcs });
      await c.close();
    } finally {
      await proxy.close();
    }
  });

  test(`with batching off every call is one Enqueue (${protocol})`, async () => {
    const proxy = await startCountingProxy(server.url);
    try {
      const c = new Client({ url: proxy.url, protocol, batching: false });
      const n = 100;
      const infos = await Promise.all(Array.from({ length: n }, () => c.enqueue("solo")));
      assert.equal(new Set(infos.map((t) => t.id)).size, n);
      assert.equal(proxy.count(ENQUEUE), n);
      assert.equal(proxy.count(BATCH), 0);
      await c.close();
    } finally {
      await proxy.close();
    }
  });
}

test("each gathered caller gets its own outcome", async () => {
  const proxy = await startCountingProxy(server.url);
  try {
    const c = new Client({ url: proxy.url, enqueueInFlight: 1 });
    const taken = (await c.enqueue("t")).id;
    const calls = Array.from({ length: 20 }, (_, i) => {
      if (i % 5 === 1) return c.enqueue("t", undefined, { taskId: taken });
      if (i % 5 === 2) return c.enqueue("t", undefined, { dependsOn: [{ taskId: MISSING }] });
      return c.enqueue("t", bytes(`n${i}`));
    });
    const outcomes = await Promise.allSettled(calls);
    assert.ok(proxy.count(BATCH) >= 1, "the calls shared an EnqueueBatch");
    for (const [i, o] of outcomes.entries()) {
      if (i % 5 === 1) assert.ok(o.reason instanceof AlreadyExistsError, `call ${i}: ${o.reason}`);
      else if (i % 5 === 2) assert.ok(o.reason instanceof InvalidArgumentError, `call ${i}: ${o.reason}`);
      else {
        assert.equal(o.status, "fulfilled", `call ${i}: ${o.reason}`);
        assert.equal(new TextDecoder().decode(o.value.payload), `n${i}`);
      }
    }
    await c.close();
  } finally {
    await proxy.close();
  }
});

test("a batch of one leaves as a plain Enqueue", async () => {
  const proxy = await startCountingProxy(server.url);
  try {
    const c = new Client({ url: proxy.url, enqueueInFlight: 1 });
    const [a, b] = await Promise.all([c.enqueue("one"), c.enqueue("one")]);
    assert.notEqual(a.id, b.id);
    assert.equal(proxy.count(ENQUEUE), 2);
    assert.equal(proxy.count(BATCH), 0);
    await c.close();
  } finally {
    await proxy.close();
  }
});

test("an aborted signal takes a gathering call out: its task is never sent", async () => {
  const c = new Client({ url: server.url, enqueueInFlight: 1 });
  const first = c.enqueue("t"); // goes alone; the next calls gather behind it
  const taskId = ulid();
  const ac = new AbortController();
  const aborted = c.enqueue("t", undefined, { taskId, signal: ac.signal });
  const kept = c.enqueue("t");
  ac.abort();
  // The caller is let go at once, not when the RPC ahead of it returns.
  const firstSettled = first.then(() => "first returned first");
  const settled = await Promise.race([aborted.then(() => "aborted call succeeded", (e) => e), firstSettled]);
  assert.ok(settled instanceof CanceledError, `${settled}`);
  const err = await rejects(aborted);
  assert.ok(err instanceof CanceledError, `${err}`);
  assert.equal(err.code, "canceled");
  await first;
  await kept;
  assert.ok((await rejects(c.getTask(taskId))) instanceof NotFoundError, "the aborted task was not sent");

  const pre = await rejects(c.enqueue("t", undefined, { signal: AbortSignal.abort() }));
  assert.ok(pre instanceof CanceledError, `${pre}`);
  const timeout = AbortSignal.abort(new DOMException("the call timed out", "TimeoutError"));
  const late = await rejects(c.enqueue("t", undefined, { signal: timeout }));
  assert.ok(late instanceof DeadlineExceededError, `${late}`);
  const get = await rejects(c.getTask(taskId, { signal: AbortSignal.abort() }));
  assert.ok(get instanceof CanceledError, `${get}`);
  await c.close();
});

test("close fails the calls still gathering", async () => {
  const c = new Client({ url: server.url, enqueueInFlight: 1 });
  const first = c.enqueue("t");
  const taskId = ulid();
  const gathering = rejects(c.enqueue("t", undefined, { taskId }));
  await c.close(); // it fails the gathering call at once, and resolves once first is answered
  const err = await gathering;
  assert.ok(err instanceof CanceledError, `${err}`);
  await first;
  const check = new Client({ url: server.url });
  assert.ok((await rejects(check.getTask(taskId))) instanceof NotFoundError);
});

test("close lets the calls sent finish, then closes the connection", async () => {
  const proxy = await startCountingProxy(server.url);
  try {
    const c = new Client({ url: proxy.url });
    await c.enqueue("t");
    assert.equal(proxy.connections(), 1);
    const sent = c.enqueue("t");
    await c.close();
    assert.equal((await sent).type, "t", "the call sent before close finished");
    await waitFor(() => proxy.connections() === 0, "the client's connection closed", 10_000);
  } finally {
    await proxy.close();
  }
});
