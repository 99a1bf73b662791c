// The Inspector's task calls against a real server: single-task actions
// and the states they leave, listings with filters and paging (a queue's
// and every queue's), the batch forms, bulk actions with their progress,
// and its errors typed as the Client's are. Over both protocols.
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  CanceledError,
  FailedPreconditionError,
  Inspector,
  InvalidArgumentError,
  NotFoundError,
  TaskAction,
  TaskState,
  UnauthenticatedError,
} from "../dist/index.js";
import { inspectorEnv } from "./inspector-helpers.mjs";
import { startServer } from "./server.mjs";
import { rejects, ulid } from "./client-helpers.mjs";

const env = inspectorEnv();

/** enqueue stores a task and returns its id. */
async function enqueue(type, options = {}) {
  return (await env.client.enqueueJSON(type, {}, options)).id;
}

/** state is the task's state as the Inspector reads it. */
async function state(id) {
  return (await env.insp.getTask(id)).state;
}

/** collect gathers what an async iterable yields. */
async function collect(iterable) {
  const out = [];
  for await (const x of iterable) out.push(x);
  return out;
}

const ids = (tasks) => tasks.map((t) => t.id);

test("a task through every single-task action, each leaving the state it says", async () => {
  const id = await enqueue("report", { queue: "actions", processInMs: 3_600_000 });
  assert.equal(await state(id), TaskState.SCHEDULED);
  const steps = [
    ["runTask of a scheduled task", (x) => env.insp.runTask(x), TaskState.PENDING],
    ["cancelTask of a pending task", (x) => env.insp.cancelTask(x), TaskState.CANCELED],
    ["runTask of a canceled task", (x) => env.insp.runTask(x), TaskState.PENDING],
    ["archiveTask of a pending task", (x) => env.insp.archiveTask(x), TaskState.ARCHIVED],
  ];
  for (const [name, act, want] of steps) {
    const info = await act(id);
    assert.equal(info.id, id, `${name}: the answer's id`);
    assert.equal(info.state, want, `${name}: the answer's state`);
    assert.equal(await state(id), want, `${name}: the stored state`);
  }
  assert.ok((await rejects(env.insp.archiveTask(id))) instanceof FailedPreconditionError, "archiveTask of an archived task");
  assert.ok((await rejects(env.insp.cancelTask(id))) instanceof FailedPreconditionError, "cancelTask of an archived task");

  await env.insp.deleteTask(id);
  assert.ok((await rejects(env.insp.getTask(id))) instanceof NotFoundError, "getTask after deleteTask");
  const again = await rejects(env.insp.deleteTask(id));
  assert.ok(again instanceof NotFoundError, "deleteTask again");
  assert.equal(again.code, "not_found");
  assert.ok((await rejects(env.insp.runTask(""))) instanceof InvalidArgumentError, "runTask of no id");
});

test("listTasks keeps what its filters say, and pages follow one another in id order", async () => {
  const all = [];
  for (let i = 0; i < 3; i++) all.push(await enqueue("email", { queue: "listing" }));
  const ada = await enqueue("email", { queue: "listing", metadata: { to: "ada@example.com" } });
  const later = await enqueue("report", { queue: "listing", processInMs: 3_600_000 });
  const grouped = await enqueue("digest", { queue: "listing", group: "daily" });
  all.push(ada, later, grouped);
  await enqueue("email", { queue: "listing-other" });

  const cases = [
    ["every task", { queue: "listing" }, all],
    ["by state", { queue: "listing", state: TaskState.SCHEDULED }, [later]],
    ["by type", { queue: "listing", type: "email" }, all.slice(0, 4)],
    ["by state and type", { queue: "listing", state: TaskState.PENDING, type: "report" }, []],
    ["by search", { queue: "listing", search: "ada@example" }, [ada]],
    ["by group", { queue: "listing", group: "daily" }, [grouped]],
    ["a queue never used", { queue: "unknown" }, []],
  ];
  for (const [name, opts, want] of cases) {
    const page = await env.insp.listTasks(opts);
    assert.deepEqual(ids(page.tasks), want, name);
    assert.equal(page.nextPageToken, "", `${name}: the last page`);
  }

  const first = await env.insp.listTasks({ queue: "listing", pageSize: 2 });
  assert.deepEqual(ids(first.tasks), all.slice(0, 2));
  assert.notEqual(first.nextPageToken, "");
  const second = await env.insp.listTasks({ queue: "listing", pageSize: 2, pageToken: first.nextPageToken });
  assert.deepEqual(ids(second.tasks), all.slice(2, 4));

  assert.ok((await rejects(env.insp.listTasks({ queue: "-bad" }))) instanceof InvalidArgumentError, "an invalid queue");
  assert.ok((await rejects(env.insp.listTasks({ queue: "listing", pageSize: 1001 }))) instanceof InvalidArgumentError, "1001 a page");
  assert.ok((await rejects(env.insp.listTasks({ queue: "listing", pageSize: 2 ** 32 }))) instanceof InvalidArgumentError, "2^32 a page");
});

test("allTasks pages through many tasks of a queue, and through every queue without one", async () => {
  const items = Array.from({ length: 250 }, () => ({ type: "bulk-list", options: { queue: "paging-a" } }));
  const res = await env.client.enqueueBatch(items);
  const a = res.map((r) => r.task.id);
  const b = [await enqueue("t", { queue: "paging-b" }), await enqueue("t", { queue: "paging-b" })];

  assert.deepEqual(ids(await collect(env.insp.allTasks({ queue: "paging-a", pageSize: 40 }))), a, "a queue, 40 a page");
  assert.deepEqual(ids(await collect(env.insp.allTasks({ queue: "paging-a" }))), a, "a queue, the server's page size");

  const firstTwo = [];
  for await (const t of env.insp.allTasks({ queue: "paging-a", pageSize: 1 })) {
    firstTwo.push(t.id);
    if (firstTwo.length === 2) break;
  }
  assert.deepEqual(firstTwo, a.slice(0, 2), "stopped after two");

  // Every queue, in name order: the other tests' queues too, so look at these two.
  const every = ids(await collect(env.insp.allTasks({ type: "t", pageSize: 1 })));
  assert.deepEqual(every.filter((id) => b.includes(id)), b, "every queue: paging-b's tasks, in order");
  const everyA = ids(await collect(env.insp.allTasks({ type: "bulk-list", pageSize: 100 })));
  assert.deepEqual(everyA, a, "every queue, filtered by type");

  await assert.rejects(collect(env.insp.allTasks({ pageToken: "x" })), InvalidArgumentError, "a page token without its queue");
  await assert.rejects(collect(env.insp.allTasks({ queue: "no good" })), InvalidArgumentError, "an invalid queue");
});

test("the batch forms act on every id they can, and say why not for the others, in order", async () => {
  const batch = [await enqueue("t", { queue: "batch" }), await enqueue("t", { queue: "batch" })];
  const missing = ulid();
  const res = await env.insp.batchCancelTasks([...batch, missing]);
  assert.equal(res.length, 3);
  for (const [i, id] of batch.entries()) {
    assert.deepEqual(res[i], { id }, `batchCancelTasks result ${i}`);
    assert.equal(await state(id), TaskState.CANCELED);
  }
  assert.equal(res[2].id, missing);
  assert.ok(res[2].error instanceof NotFoundError, "the missing id's error is typed by the server's code");
  assert.equal(res[2].error.code, "not_found");
  assert.match(res[2].error.message, /not found/);
  const again = await env.insp.batchCancelTasks([batch[0]]);
  assert.ok(again[0].error instanceof FailedPreconditionError, "canceling a canceled task again");
  assert.equal(again[0].error.code, "failed_precondition");

  for (const [name, act, want] of [
    ["batchRunTasks", (x) => env.insp.batchRunTasks(x), TaskState.PENDING],
    ["batchArchiveTasks", (x) => env.insp.batchArchiveTasks(x), TaskState.ARCHIVED],
  ]) {
    const r = await act(batch);
    assert.deepEqual(r, batch.map((id) => ({ id })), name);
    for (const id of batch) assert.equal(await state(id), want, name);
  }
  assert.deepEqual(await env.insp.batchDeleteTasks(batch), batch.map((id) => ({ id })));
  for (const id of batch) assert.ok((await rejects(env.insp.getTask(id))) instanceof NotFoundError);
  assert.ok((await rejects(env.insp.batchRunTasks([]))) instanceof InvalidArgumentError, "no id");
});

test("bulkTasks acts on every task its filter matches, reporting its progress, or is refused whole", async () => {
  const emails = [];
  for (let i = 0; i < 5; i++) emails.push(await enqueue("email", { queue: "bulk" }));
  const report = await enqueue("report", { queue: "bulk" });

  const reports = [];
  const got = await env.insp.bulkTasks(TaskAction.ARCHIVE, {
    queue: "bulk", state: TaskState.PENDING, type: "email", onProgress: (p) => reports.push(p),
  });
  assert.deepEqual([got.total, got.succeeded, got.failed, got.done], [5n, 5n, 0n, true], "the final counts");
  assert.ok(reports.length > 0 && reports.at(-1) === got, "the progress ends with the final report");
  for (const id of emails) assert.equal(await state(id), TaskState.ARCHIVED);
  assert.equal(await state(report), TaskState.PENDING, "the task of another type");

  const refused = await rejects(env.insp.bulkTasks(TaskAction.RUN, { queue: "bulk", state: TaskState.PENDING }));
  assert.ok(refused instanceof FailedPreconditionError, `running pending tasks: ${refused}`);
  assert.ok((await rejects(env.insp.bulkTasks(TaskAction.RUN, { queue: "bulk" }))) instanceof InvalidArgumentError, "no state");
  const noAction = await rejects(env.insp.bulkTasks(TaskAction.UNSPECIFIED, { queue: "bulk", state: TaskState.PENDING }));
  assert.ok(noAction instanceof InvalidArgumentError, "no action");

  // As an async iterator.
  const seen = await collect(env.insp.bulkTasksProgress(TaskAction.DELETE, { queue: "bulk", state: TaskState.ARCHIVED }));
  const last = seen.at(-1);
  assert.deepEqual([last.total, last.succeeded, last.done], [5n, 5n, true]);
  assert.ok(seen.slice(0, -1).every((p) => !p.done), "only the last report is done");
  assert.deepEqual(ids((await env.insp.listTasks({ queue: "bulk" })).tasks), [report], "after the bulk delete");
  await assert.rejects(collect(env.insp.bulkTasksProgress(TaskAction.RUN, { queue: "bulk", state: TaskState.PENDING })), FailedPreconditionError);
});

test("a call's signal aborts it with CanceledError", async () => {
  const ac = new AbortController();
  ac.abort();
  assert.ok((await rejects(env.insp.listQueues({ signal: ac.signal }))) instanceof CanceledError);
  assert.ok((await rejects(env.insp.listTasks({ queue: "q", signal: ac.signal }))) instanceof CanceledError);
  const bulk = env.insp.bulkTasks(TaskAction.ARCHIVE, { queue: "q", state: TaskState.PENDING, signal: ac.signal });
  assert.ok((await rejects(bulk)) instanceof CanceledError);
});

for (const protocol of ["grpc", "connect"]) {
  test(`a unary call, a listing and the BulkTasks stream work over ${protocol}`, async () => {
    const i = new Inspector({ url: env.server.url, protocol });
    const queue = `proto-${protocol}`;
    const id = await enqueue("t", { queue });
    assert.equal((await i.getTask(id)).id, id);
    assert.deepEqual(ids((await i.listTasks({ queue })).tasks), [id]);
    const done = await i.bulkTasks(TaskAction.CANCEL, { queue, state: TaskState.PENDING });
    assert.equal(done.succeeded, 1n);
    assert.ok((await rejects(i.getTask(ulid()))) instanceof NotFoundError);
  });
}

test("the token is sent; without it every call is refused as unauthenticated", async (t) => {
  const secured = await startServer(["--token", "s3cret"]);
  t.after(() => secured.cleanup());
  const refused = await rejects(new Inspector({ url: secured.url }).listQueues());
  assert.ok(refused instanceof UnauthenticatedError, `${refused}`);
  assert.deepEqual(await new Inspector({ url: secured.url, token: "s3cret" }).listQueues(), []);
  assert.throws(() => new Inspector({ url: "127.0.0.1:7420" }), TypeError, "a URL without a scheme");
  assert.throws(() => new Inspector({ url: secured.url, protocol: "http" }), TypeError, "a protocol that is not one");
});
