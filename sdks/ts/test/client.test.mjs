// The Client against a real server: every option round-trips to GetTask,
// the protocol's defaults, the bounds refused before sending and by the
// server, and the errors typed by code. Over both protocols.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import {
  AlreadyExistsError,
  Client,
  FailedPreconditionError,
  InvalidArgumentError,
  NotFoundError,
  OnFailure,
  RetryStrategy,
  TaskState,
  rawJSON,
} from "../dist/index.js";
import { startServer } from "./server.mjs";
import { rejects, ulid } from "./client-helpers.mjs";

let server;
before(async () => {
  server = await startServer();
});
after(async () => {
  await server?.cleanup();
});

const text = (b) => new TextDecoder().decode(b);
const bytes = (s) => new TextEncoder().encode(s);
const ms = (d) => Number(d.seconds) * 1000 + d.nanos / 1e6;
const date = (ts) => new Date(Number(ts.seconds) * 1000 + ts.nanos / 1e6);


for (const protocol of ["grpc", "connect"]) {
  test(`every option round-trips to GetTask (${protocol})`, async () => {
    const c = new Client({ url: server.url, protocol });
    const parent = await c.enqueue("parent");
    const taskId = ulid();
    const deadline = new Date(Date.now() + 3_600_000);
    const expiresAt = new Date(Date.now() + 7_200_000);
    const payload = bytes("\x00\x01binary");
    const sent = await c.enqueue("all", payload, {
      taskId,
      queue: "q-1.x_y",
      contentType: "application/octet-stream",
      metadata: { traceparent: "00-abc", "k é": "v ✓" },
      maxRetry: 3,
      timeoutMs: 1500,
      deadline,
      uniqueKey: `u-${protocol}`,
      uniqueTtlMs: 60_000,
      priority: 9,
      retentionMs: 0,
      expiresAt,
      dependsOn: [{ taskId: parent.id, onFailure: OnFailure.CASCADE_CANCEL }],
      concurrencyKey: "ck",
      retryPolicy: { strategy: RetryStrategy.LINEAR, baseMs: 2000, maxMs: 9000 },
    });
    assert.equal(sent.id, taskId);
    assert.equal(sent.state, TaskState.BLOCKED);
    const got = await c.getTask(taskId);
    assert.equal(got.queue, "q-1.x_y");
    assert.equal(got.type, "all");
    assert.deepEqual(got.payload, payload);
    assert.equal(got.contentType, "application/octet-stream");
    assert.deepEqual(got.metadata, { traceparent: "00-abc", "k é": "v ✓" });
    assert.equal(got.maxRetry, 3);
    assert.equal(got.priority, 9);
    assert.equal(got.concurrencyKey, "ck");
    assert.equal(got.expiresAt && date(got.expiresAt).getTime(), expiresAt.getTime());
    assert.equal(got.dependsOn[0]?.taskId, parent.id);
    assert.equal(got.dependsOn[0]?.onFailure, OnFailure.CASCADE_CANCEL);
    const o = got.options;
    assert.ok(o, "options stored");
    assert.equal(ms(o.timeout), 1500);
    assert.equal(date(o.deadline).getTime(), deadline.getTime());
    assert.equal(o.uniqueKey, `u-${protocol}`);
    assert.equal(ms(o.uniqueTtl), 60_000);
    assert.ok(o.retention, "retention 0 is sent as an explicit zero");
    assert.equal(ms(o.retention), 0);
    assert.equal(o.retryPolicy?.strategy, RetryStrategy.LINEAR);
    assert.equal(ms(o.retryPolicy.base), 2000);
    assert.equal(ms(o.retryPolicy.max), 9000);

    // The options not compatible with the ones above, on tasks of their own.
    const at = new Date(Date.now() + 600_000);
    const scheduled = await c.getTask((await c.enqueue("later", undefined, { processAt: at, expiresInMs: 900_000 })).id);
    assert.equal(scheduled.state, TaskState.SCHEDULED);
    assert.equal(date(scheduled.nextProcessAt).getTime(), at.getTime());
    assert.equal(ms(scheduled.options.expiresIn), 900_000);
    const delayed = await c.getTask((await c.enqueue("later", undefined, { processInMs: 300_000.0000001 })).id);
    assert.equal(delayed.state, TaskState.SCHEDULED);
    assert.equal(delayed.options.processIn.seconds, 300n);
    assert.equal(delayed.options.processIn.nanos, 0, "fractions of a millisecond round to the nanosecond");
    const grouped = await c.getTask((await c.enqueue("g", undefined, { group: "grp" })).id);
    assert.equal(grouped.state, TaskState.AGGREGATING);
    assert.equal(grouped.group, "grp");
    const once = await c.getTask((await c.enqueue("once", undefined, { atMostOnce: true })).id);
    assert.equal(once.options?.atMostOnce, true);
    await c.close();
  });

  test(`the protocol's defaults (${protocol})`, async () => {
    const c = new Client({ url: server.url, protocol });
    const t = await c.getTask((await c.enqueue("d")).id);
    assert.equal(t.queue, "default");
    assert.equal(t.priority, 4);
    assert.equal(t.maxRetry, 25);
    assert.equal(t.contentType, "application/json");
    assert.equal(t.state, TaskState.PENDING);
    assert.equal(t.options, undefined, "no option set sends no options");
    const z = await c.getTask((await c.enqueue("d", undefined, { priority: 0, maxRetry: 0 })).id);
    assert.equal(z.priority, 4);
    assert.equal(z.maxRetry, 25);
    await c.close();
  });

  test(`already_exists on a repeated taskId and a held unique key (${protocol})`, async () => {
    const c = new Client({ url: server.url, protocol });
    const taskId = ulid();
    await c.enqueue("t", undefined, { taskId });
    const dup = await rejects(c.enqueue("t", undefined, { taskId }));
    assert.ok(dup instanceof AlreadyExistsError, `${dup}`);
    assert.equal(dup.code, "already_exists");
    await c.enqueue("t", undefined, { uniqueKey: `key-${protocol}` });
    const held = await rejects(c.enqueue("t", undefined, { uniqueKey: `key-${protocol}` }));
    assert.ok(held instanceof AlreadyExistsError, `${held}`);
    await c.close();
  });

  test(`server-side refusals are typed (${protocol})`, async () => {
    const c = new Client({ url: server.url, protocol });
    // A dependency on a task that does not exist passes the client's checks.
    const dep = await rejects(c.enqueue("t", undefined, { dependsOn: [{ taskId: "01J00000000000000000000000" }] }));
    assert.ok(dep instanceof InvalidArgumentError, `${dep}`);
    assert.equal(dep.code, "invalid_argument");
    assert.match(dep.message, /depends_on\[0\]/);
    const missing = await rejects(c.getTask("01J00000000000000000000001"));
    assert.ok(missing instanceof NotFoundError, `${missing}`);
    const empty = await rejects(c.getTask(""));
    assert.ok(empty instanceof InvalidArgumentError, `${empty}`);
    await c.close();
  });

  test(`enqueueJSON sends JSON, and rawJSON's text unchanged (${protocol})`, async () => {
    const c = new Client({ url: server.url, protocol });
    const v = await c.getTask((await c.enqueueJSON("j", { s: "é\n\"", n: [1, 2.5] })).id);
    assert.equal(text(v.payload), '{"s":"é\\n\\"","n":[1,2.5]}');
    assert.equal(v.contentType, "application/json");
    const big = '{"id": 12345678901234567890, "u": "\\u00e9"}';
    const r = await c.getTask((await c.enqueueJSON("j", rawJSON(big))).id);
    assert.equal(text(r.payload), big);
    assert.throws(() => rawJSON("{nope"), InvalidArgumentError);
    const none = await rejects(c.enqueueJSON("j", undefined));
    assert.ok(none instanceof InvalidArgumentError, `${none}`);
    await c.close();
  });
}

test("the bounds are refused before sending, naming the field", async () => {
  // No server at this URL: a refusal that reached the network would fail otherwise.
  const c = new Client({ url: "http://127.0.0.1:1", batching: false });
  const later = new Date(Date.now() + 60_000);
  const cases = [
    [["", undefined, {}], /type is required/],
    [["t", undefined, { queue: "a b" }], /queue "a b" must match/],
    [["t", undefined, { queue: "-x" }], /queue "-x" must match/],
    [["t", undefined, { queue: "q".repeat(1025) }], /queue/],
    [["t", new Uint8Array((1 << 20) + 1), {}], /payload is 1048577 bytes; the limit is 1048576/],
    [["t", undefined, { priority: 10 }], /priority must be an integer in 0\.\.9, got 10/],
    [["t", undefined, { priority: -1 }], /priority/],
    [["t", undefined, { priority: 1.5 }], /priority/],
    [["t", undefined, { maxRetry: -1 }], /maxRetry must be an integer in 0\.\./],
    [["t", undefined, { timeoutMs: -5 }], /timeoutMs must be a number of milliseconds in 0\.\./],
    [["t", undefined, { processInMs: 1e20 }], /processInMs must be/],
    [["t", undefined, { retentionMs: Number.NaN }], /retentionMs must be/],
    [["t", undefined, { processAt: later, processInMs: 5 }], /processAt and processInMs are mutually exclusive/],
    [["t", undefined, { expiresAt: later, expiresInMs: 5 }], /expiresAt and expiresInMs are mutually exclusive/],
    [["t", undefined, { group: "g", processInMs: 5 }], /group is mutually exclusive with processAt and processInMs/],
    [["t", undefined, { group: "g", processAt: later }], /group is mutually exclusive/],
    [["t", undefined, { group: "g", concurrencyKey: "k" }], /group and concurrencyKey are mutually exclusive/],
    [["t", undefined, { group: "g", atMostOnce: true }], /group and atMostOnce are mutually exclusive/],
    [["t", undefined, { atMostOnce: "yes" }], /atMostOnce must be a boolean, got string/],
    [["t", undefined, { uniqueTtlMs: 5 }], /uniqueTtlMs requires uniqueKey/],
    [["t", undefined, { taskId: "nope" }], /taskId "nope" is not a ULID/],
    [["t", undefined, { deadline: new Date(NaN) }], /deadline must be a valid Date/],
    [["t", undefined, { dependsOn: [{ taskId: "x" }] }], /dependsOn\[0\]\.taskId "x" is not a ULID/],
    [["t", undefined, { retryPolicy: { baseMs: 10, maxMs: 5 } }], /retryPolicy\.maxMs \(5\) is less than retryPolicy\.baseMs \(10\)/],
    [["t", undefined, { metadata: Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`k${i}`, ""])) }], /metadata has 65 entries/],
    [["t", undefined, { uniqueKey: "k".repeat(1025) }], /uniqueKey is 1025 bytes/],
  ];
  for (const [args, message] of cases) {
    const err = await rejects(c.enqueue(...args));
    assert.ok(err instanceof InvalidArgumentError, `${JSON.stringify(args[2])}: ${err}`);
    assert.equal(err.code, "invalid_argument");
    assert.match(err.message, message);
    assert.match(err.message, /^conveyor: /);
  }
  assert.deepEqual(c.stats(), { enqueueCalls: 0, enqueueRpcs: 0 });
  await c.close();
});

test("a closed client refuses calls", async () => {
  const c = new Client({ url: server.url });
  await c.close();
  const err = await rejects(c.enqueue("t"));
  assert.ok(err instanceof FailedPreconditionError, `${err}`);
});

// The client's bounds are the server's: each request the client refuses,
// sent past it on the raw TaskService, the server refuses too, with the
// code the client gives; and the values at the bounds both accept.
test("the client's bounds are the server's", async () => {
  const { create } = await import("@bufbuild/protobuf");
  const { durationFromMs, timestampFromDate } = await import("@bufbuild/protobuf/wkt");
  const { createClient } = await import("@connectrpc/connect");
  const { EnqueueRequestSchema, TaskService, createTransport, toConveyorError } = await import("../dist/index.js");
  const raw = createClient(TaskService, createTransport({ url: server.url }));
  const c = new Client({ url: server.url, batching: false });
  const later = timestampFromDate(new Date(Date.now() + 60_000));
  const refused = [
    [{ queue: "a b" }, { queue: "a b" }],
    [{ queue: "q".repeat(1025) }, { queue: "q".repeat(1025) }],
    [{ payload: new Uint8Array((1 << 20) + 1) }, { payload: new Uint8Array((1 << 20) + 1) }],
    [{ options: { priority: 10 } }, { options: { priority: 10 } }],
    [{ options: { maxRetry: -1 } }, { options: { maxRetry: -1 } }],
    [{ options: { processAt: later, processIn: durationFromMs(5) } }, { options: { processAt: new Date(Date.now() + 60_000), processInMs: 5 } }],
    [{ options: { expiresAt: later, expiresIn: durationFromMs(5) } }, { options: { expiresAt: new Date(Date.now() + 60_000), expiresInMs: 5 } }],
    [{ options: { group: "g", processIn: durationFromMs(5) } }, { options: { group: "g", processInMs: 5 } }],
    [{ options: { group: "g", concurrencyKey: "k" } }, { options: { group: "g", concurrencyKey: "k" } }],
    [{ options: { group: "g", atMostOnce: true } }, { options: { group: "g", atMostOnce: true } }],
    [{ options: { uniqueTtl: durationFromMs(5) } }, { options: { uniqueTtlMs: 5 } }],
    [{ taskId: "nope" }, { options: { taskId: "nope" } }],
    [{ options: { timeout: { seconds: -1n, nanos: 0 } } }, { options: { timeoutMs: -1000 } }],
  ];
  for (const [wire, sdk] of refused) {
    const serverErr = toConveyorError(await rejects(raw.enqueue(create(EnqueueRequestSchema, { type: "t", ...wire }))));
    assert.ok(serverErr instanceof InvalidArgumentError, `server: ${serverErr}`);
    const { payload, options = {} } = sdk;
    const clientErr = await rejects(c.enqueue("t", payload, { ...options, queue: sdk.queue ?? options.queue }));
    assert.ok(clientErr instanceof InvalidArgumentError, `client: ${clientErr}`);
  }
  // The values at the bounds pass both.
  const edge = await c.enqueue("t", new Uint8Array(1 << 20), { queue: `q${"-".repeat(1023)}`, priority: 9, maxRetry: 2 ** 31 - 1 });
  assert.equal(edge.payload.length, 1 << 20);
  assert.equal(edge.priority, 9);
  assert.deepEqual(c.stats(), { enqueueCalls: 1, enqueueRpcs: 1 });
  await c.close();
});
