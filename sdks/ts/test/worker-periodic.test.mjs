// Periodic jobs declared beside the handlers, against a real server: two
// workers declaring one entry both run and leave one entry, which fires
// and runs; a later declaration updates the template and keeps the
// schedule; a refused spec rejects run().
import assert from "node:assert/strict";
import { test } from "node:test";
import { InvalidArgumentError, Worker } from "../dist/index.js";
import { startServer } from "./server.mjs";
import { clients, text, waitFor } from "./worker-helpers.mjs";

const payload = (s) => new TextEncoder().encode(s);

function periodicWorker(url, spec, body, ran) {
  const w = new Worker({ url, queues: { p: 1 }, reconnectBaseMs: 20, reconnectMaxMs: 200 });
  w.handle("tick", ({ task }) => {
    ran?.push(text(task.payload));
    return "ok";
  });
  w.periodic({ id: "tick", spec, type: "tick", payload: payload(body), options: { queue: "p" } });
  return w;
}

test("two workers declaring one periodic job leave one entry, which fires", async (t) => {
  const server = await startServer();
  t.after(() => server.cleanup());
  const c = clients(server.url);
  const ran = [];
  const workers = [periodicWorker(server.url, "@every 1s", '{"n":1}', ran), periodicWorker(server.url, "@every 1s", '{"n":1}', ran)];
  const runs = workers.map((w) => w.run());
  t.after(async () => {
    await Promise.all(workers.map((w) => w.stop()));
    await Promise.all(runs);
  });
  await waitFor(() => ran.length > 0, "the periodic task's run");
  assert.equal(ran[0], '{"n":1}');
  const { entries } = await c.admin.listCrons({});
  assert.equal(entries.length, 1);
  assert.equal(entries[0].spec, "@every 1s");
  assert.equal(entries[0].queue, "p");
});

test("a declaration updates the template and keeps the schedule; a new spec replaces it", async (t) => {
  const server = await startServer();
  t.after(() => server.cleanup());
  const c = clients(server.url);
  const declareWith = async (spec, body) => {
    const w = periodicWorker(server.url, spec, body);
    const run = w.run();
    await waitFor(async () => {
      try {
        const e = await c.admin.getCron({ id: "tick" });
        return e.spec === spec && text(e.payload) === body;
      } catch {
        return false;
      }
    }, `the entry with ${spec} and ${body}`);
    await w.stop();
    await run;
  };
  await declareWith("@every 1h", '{"v":1}');
  const next = (await c.admin.getCron({ id: "tick" })).nextRunAt;
  await declareWith("@every 1h", '{"v":2}');
  assert.deepEqual((await c.admin.getCron({ id: "tick" })).nextRunAt, next, "the schedule kept");
  await declareWith("@every 2h", '{"v":2}');
});

test("a refused periodic job rejects run(); bad declarations throw", async (t) => {
  const server = await startServer();
  t.after(() => server.cleanup());
  const w = periodicWorker(server.url, "not a spec", "{}");
  await assert.rejects(w.run(), InvalidArgumentError);
  const v = new Worker({ url: server.url });
  assert.throws(() => v.periodic({ id: "", spec: "@hourly", type: "t" }), TypeError);
  assert.throws(() => v.periodic({ id: "x", spec: "", type: "t" }), TypeError);
  assert.throws(() => v.periodic({ id: "x", spec: "@hourly", type: "" }), InvalidArgumentError);
  v.periodic({ id: "x", spec: "@hourly", type: "t" });
  assert.throws(() => v.periodic({ id: "x", spec: "@daily", type: "t" }), TypeError);
});
