// Routing and start authorization end to end, against a real server: a
// worker is given only the types it handles, ListWorkers shows what its
// Hello declared, and an at-most-once task runs once, or, when the
// outcome of its authorized run is lost, is archived rather than run again.
import assert from "node:assert/strict";
import { test } from "node:test";
import { hostname } from "node:os";
import { Client, Worker } from "../dist/index.js";
import { startServer } from "./server.mjs";
import { TaskState, clients, enqueue, untilAborted, waitFor, waitState } from "./worker-helpers.mjs";

/** runWorker runs a worker made with opts and set up by register; t stops it. */
function runWorker(t, opts, register) {
  const worker = new Worker(opts);
  register(worker);
  const running = worker.run();
  const stop = async () => {
    await worker.stop();
    await running;
  };
  t.after(stop);
  return { worker, stop };
}

test("a typed worker is given only its types, and ListWorkers shows its types and release", async (t) => {
  const server = await startServer();
  t.after(() => server.cleanup());
  const c = clients(server.url);
  runWorker(t, { url: server.url, releaseId: "r-a" }, (w) => w.handle("a", () => "done a"));
  const b = await enqueue(c.tasks, "b", "{}");
  const a = await enqueue(c.tasks, "a", "{}");
  await waitState(c.tasks, a, TaskState.COMPLETED);
  let tb = await c.tasks.getTask({ id: b });
  assert.equal(tb.state, TaskState.PENDING, "b waits: no worker handles it");
  assert.equal(tb.retried, 0, "b was never given to the worker of a");

  const { workers } = await c.admin.listWorkers({});
  const w = workers.find((x) => x.releaseId === "r-a");
  assert.ok(w, `a worker of release r-a among ${JSON.stringify(workers.map((x) => x.releaseId))}`);
  assert.deepEqual(w.types, ["a"]);
  assert.equal(w.startAuthorization, true);
  assert.equal(w.labels.pid, String(process.pid), "the worker says which process it is");
  assert.equal(w.labels.host, hostname());

  runWorker(t, { url: server.url }, (x) => x.handle("b", () => "done b"));
  tb = await waitState(c.tasks, b, TaskState.COMPLETED);
  assert.equal(tb.retried, 0);
});

for (const protocol of ["grpc", "connect"]) {
  test(`an at-most-once task runs once, after its start is authorized (${protocol})`, async (t) => {
    const server = await startServer();
    t.after(() => server.cleanup());
    const client = new Client({ url: server.url, protocol });
    t.after(() => client.close());
    const runs = [];
    runWorker(t, { url: server.url, protocol }, (w) =>
      w.handle("once", ({ task }) => {
        runs.push(task.id);
        return "ran";
      }),
    );
    const task = await client.enqueue("once", undefined, { atMostOnce: true });
    const done = await waitState(clients(server.url).tasks, task.id, TaskState.COMPLETED);
    assert.equal(new TextDecoder().decode(done.result), "ran");
    assert.deepEqual(runs, [task.id]);
  });
}

test("an at-most-once task whose authorized run ends with no outcome is archived, never run again", async (t) => {
  const server = await startServer();
  t.after(() => server.cleanup());
  const client = new Client({ url: server.url });
  t.after(() => client.close());
  const c = clients(server.url);
  const runs = [];
  const handler = (w) =>
    w.handle("once", async ({ task, signal }) => {
      runs.push(task.id);
      if (runs.length === 1) throw await untilAborted(signal); // the first run hangs until the drain gives up
      return "ran";
    });
  // drainTimeoutMs 0: stop() gives the running attempt back (RELEASED) at once.
  const first = runWorker(t, { url: server.url, drainTimeoutMs: 0 }, handler);
  const lost = await client.enqueue("once", undefined, { atMostOnce: true });
  await waitFor(() => runs.length === 1, "the first run");
  await first.stop();
  const archived = await waitState(c.tasks, lost.id, TaskState.ARCHIVED);
  assert.match(archived.lastError, /^outcome unknown: /);

  // Another worker of the type is given new work, never the archived task.
  runWorker(t, { url: server.url }, handler);
  const next = await client.enqueue("once", undefined, { atMostOnce: true });
  await waitState(c.tasks, next.id, TaskState.COMPLETED);
  assert.deepEqual(runs, [lost.id, next.id]);
  assert.equal((await c.tasks.getTask({ id: lost.id })).state, TaskState.ARCHIVED);
});
