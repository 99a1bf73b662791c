// The Inspector's queue, cron, group, worker, release and cluster calls
// against a real server: each reads back as the call left it, and its
// refusals are the SDK's typed errors.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { durationMs, timestampMs } from "@bufbuild/protobuf/wkt";
import {
  AlreadyExistsError,
  Client,
  FailedPreconditionError,
  HistoryResolution,
  Inspector,
  InvalidArgumentError,
  NotFoundError,
  TaskState,
  VERSION,
  Worker,
} from "../dist/index.js";
import { startServer } from "./server.mjs";
import { rejects } from "./client-helpers.mjs";
import { waitFor } from "./worker-helpers.mjs";

let server;
let client;
let insp;
before(async () => {
  server = await startServer();
  client = new Client({ url: server.url, batching: false });
  insp = new Inspector({ url: server.url });
});
after(async () => {
  await client?.close();
  await server?.cleanup();
});

const bytes = (s) => new TextEncoder().encode(s);
const text = (b) => new TextDecoder().decode(b);

test("a queue paused reads paused and resumed reads resumed; listQueues and getQueue see what it holds", async () => {
  await client.enqueueJSON("t", {}, { queue: "q-emails" });
  await client.enqueueJSON("t", {}, { queue: "q-reports" });

  const qs = (await insp.listQueues()).filter((q) => q.name.startsWith("q-"));
  assert.deepEqual(qs.map((q) => q.name), ["q-emails", "q-reports"], "sorted by name");
  assert.equal(qs[0].pending, 1n);
  assert.equal(qs[0].enqueued, 1n);
  assert.equal(qs[0].config?.concurrencyLimit, 1, "the effective concurrency limit");

  let q = await insp.pauseQueue("q-emails");
  assert.equal(q.name, "q-emails");
  assert.equal(q.paused, true);
  q = await insp.getQueue("q-emails");
  assert.equal(q.paused, true);
  assert.equal(q.pending, 1n);
  assert.equal((await insp.resumeQueue("q-emails")).paused, false);
  assert.equal((await insp.getQueue("q-emails")).paused, false);

  assert.ok((await rejects(insp.getQueue("never-used"))) instanceof NotFoundError, "getQueue of an unknown queue");
  assert.ok((await rejects(insp.getQueue("not valid"))) instanceof InvalidArgumentError, "getQueue of an invalid name");
  assert.ok((await rejects(insp.resumeQueue(""))) instanceof InvalidArgumentError, "resumeQueue of no name");
});

test("an empty queue is deleted; one that holds a task is refused", async () => {
  await client.enqueueJSON("t", {}, { queue: "busy" });
  assert.ok((await rejects(insp.deleteQueue("busy"))) instanceof FailedPreconditionError);
  assert.equal((await insp.pauseQueue("empty")).paused, true, "pauseQueue makes the queue");
  await insp.deleteQueue("empty");
  assert.ok((await rejects(insp.getQueue("empty"))) instanceof NotFoundError, "getQueue after deleteQueue");
  assert.ok((await rejects(insp.deleteQueue("empty"))) instanceof NotFoundError, "deleteQueue again");
  assert.ok((await rejects(insp.deleteQueue(""))) instanceof InvalidArgumentError, "deleteQueue of no name");
});

test("updateQueueConfig with settings changes only those; without, it replaces the whole", async () => {
  let got = await insp.updateQueueConfig({ queue: "cfg", maxActive: 5, concurrencyLimit: 7 }, ["maxActive"]);
  assert.equal(got.maxActive, 5);
  assert.equal(got.concurrencyLimit, 1, "concurrencyLimit was not among the settings");
  got = await insp.updateQueueConfig({ queue: "cfg", rateLimit: { perSecond: 50 } }, ["rateLimit.perSecond"]);
  assert.equal(got.rateLimit?.perSecond, 50);
  assert.equal(got.maxActive, 5, "kept");
  got = await insp.updateQueueConfig({ queue: "cfg", groupPolicy: { maxDelayMs: 90_000 }, push: { timeoutMs: 1500 } },
    ["groupPolicy.maxDelayMs", "push.timeoutMs"]);
  assert.equal(durationMs(got.groupPolicy.maxDelay), 90_000);
  assert.equal(durationMs(got.push.timeout), 1500);

  const eff = await insp.getQueueConfig("cfg");
  assert.equal(eff.maxActive, 5);
  assert.equal(eff.rateLimit?.burst, 50, "the effective burst is the rate's");
  assert.ok(eff.groupPolicy?.maxSize > 0, "the effective group policy holds the server's default");

  const stored = await insp.getStoredQueueConfig("cfg");
  assert.equal(stored.maxActive, 5);
  assert.equal(stored.rateLimit?.burst, 0, "the stored burst follows the default");
  assert.equal(stored.groupPolicy?.maxSize, 0);
  assert.equal(stored.maxWaiting, 0n);

  // A read-modify-write of the stored configuration keeps the rest.
  stored.maxWaiting = 100n;
  got = await insp.updateQueueConfig(stored);
  assert.equal(got.maxWaiting, 100n);
  assert.equal(got.maxActive, 5);
  assert.equal(durationMs(got.groupPolicy.maxDelay), 90_000);
  // A whole replace from the plain form: what is not given follows its default.
  got = await insp.updateQueueConfig({ queue: "cfg", maxWaiting: 7 });
  assert.deepEqual([got.maxWaiting, got.maxActive, got.rateLimit?.perSecond], [7n, 0, 0]);

  const cases = [
    ["a setting that is not one", () => insp.updateQueueConfig({ queue: "cfg" }, ["paused"])],
    ["a negative maxActive", () => insp.updateQueueConfig({ queue: "cfg", maxActive: -1 }, ["maxActive"])],
    ["a maxActive past 32 bits", () => insp.updateQueueConfig({ queue: "cfg", maxActive: 2 ** 32 }, ["maxActive"])],
    ["a fractional duration", () => insp.updateQueueConfig({ queue: "cfg", push: { timeoutMs: 0.5 } }, ["push.timeoutMs"])],
    ["an invalid queue", () => insp.updateQueueConfig({ queue: "no good", maxActive: 1 })],
    ["getQueueConfig of an invalid queue", () => insp.getQueueConfig("no good")],
  ];
  for (const [name, call] of cases) {
    const err = await rejects(call());
    assert.ok(err instanceof InvalidArgumentError, `${name}: ${err}`);
  }
  assert.equal((await insp.getQueueConfig("cfg")).maxWaiting, 7n, "the refused updates changed nothing");
});

test("a cron entry created, read, updated by field and whole, paused, resumed, listed and deleted", async () => {
  const e = await insp.createCron({
    id: "sync", spec: "@every 1h", type: "sync", payload: bytes('{"full":false}'),
    metadata: { team: "data" }, options: { priority: 7, timeoutMs: 30_000 },
  });
  assert.equal(e.id, "sync");
  assert.equal(e.queue, "default");
  assert.equal(e.options?.priority, 7);
  assert.equal(durationMs(e.options.timeout), 30_000);
  assert.equal(e.paused, false);
  assert.ok(e.nextRunAt && !e.lastRunAt, "a new entry's runs");

  let got = await insp.getCron("sync");
  assert.equal(got.spec, "@every 1h");
  assert.equal(text(got.payload), '{"full":false}');
  assert.deepEqual(got.metadata, { team: "data" });

  // One field at a time: the others keep their values.
  got = await insp.updateCron({ id: "sync", spec: "@every 2h" }, ["spec"]);
  assert.equal(got.spec, "@every 2h");
  assert.equal(got.type, "sync", "type kept");
  assert.equal(got.options?.priority, 7, "priority kept");
  assert.ok(timestampMs(got.nextRunAt) > timestampMs(e.nextRunAt), "the next run after a longer spec");
  const next = timestampMs(got.nextRunAt);
  got = await insp.updateCron({ id: "sync", options: { priority: 3 } }, ["options.priority"]);
  assert.equal(got.options?.priority, 3);
  assert.equal(durationMs(got.options.timeout), 30_000, "the other options kept");
  assert.equal(got.spec, "@every 2h");
  assert.equal(timestampMs(got.nextRunAt), next, "the next run kept by a template change");

  got = await insp.pauseCron("sync");
  assert.equal(got.paused, true);
  assert.equal(got.nextRunAt, undefined);
  assert.equal((await insp.getCron("sync")).paused, true);
  got = await insp.resumeCron("sync");
  assert.equal(got.paused, false);
  assert.ok(got.nextRunAt);

  // A read-modify-write of the entry as read.
  got.metadata.owner = "ops";
  got = await insp.updateCron(got);
  assert.deepEqual(got.metadata, { team: "data", owner: "ops" });
  assert.equal(got.options?.priority, 3);
  // A whole replace: paused is the entry's, and every field not given is cleared.
  got = await insp.updateCron({ id: "sync", spec: "@daily", type: "sync:full", paused: true });
  assert.equal(got.type, "sync:full");
  assert.equal(got.paused, true);
  assert.equal(got.options?.priority ?? 0, 0);
  assert.deepEqual(got.metadata, {});

  const other = await insp.createCron({ spec: "0 3 * * *", type: "report", queue: "cron-reports", paused: true });
  assert.ok(other.id !== "" && other.paused && other.nextRunAt === undefined, "created without an id, paused");
  const list = await insp.listCrons();
  assert.deepEqual(Object.fromEntries(list.map((x) => [x.id, x.type])), { sync: "sync:full", [other.id]: "report" });
  // A queue a cron entry enqueues into cannot be deleted, even empty.
  await insp.pauseQueue("cron-reports");
  const refused = await rejects(insp.deleteQueue("cron-reports"));
  assert.ok(refused instanceof FailedPreconditionError);
  assert.match(refused.message, new RegExp(other.id));

  await insp.deleteCron("sync");
  assert.ok((await rejects(insp.getCron("sync"))) instanceof NotFoundError, "getCron after deleteCron");
  assert.ok((await rejects(insp.deleteCron("sync"))) instanceof NotFoundError, "deleteCron again");
  assert.deepEqual((await insp.listCrons()).map((x) => x.id), [other.id]);
  await insp.deleteCron(other.id);
});

test("the cron calls' refusals are the SDK's typed errors", async () => {
  await insp.createCron({ id: "a", spec: "@hourly", type: "t" });
  const cases = [
    ["createCron of a taken id", () => insp.createCron({ id: "a", spec: "@hourly", type: "t" }), AlreadyExistsError],
    ["createCron of a bad spec", () => insp.createCron({ spec: "every so often", type: "t" }), InvalidArgumentError],
    ["createCron of no type", () => insp.createCron({ spec: "@hourly" }), InvalidArgumentError],
    ["createCron of a fixed time", () => insp.createCron({ spec: "@hourly", type: "t", options: { deadline: new Date() } }), InvalidArgumentError],
    ["createCron of a bad option", () => insp.createCron({ spec: "@hourly", type: "t", options: { priority: 12 } }), InvalidArgumentError],
    ["updateCron of the pause by field", () => insp.updateCron({ id: "a", paused: true }, ["paused"]), InvalidArgumentError],
    ["updateCron of an unknown option", () => insp.updateCron({ id: "a" }, ["options.nope"]), InvalidArgumentError],
    ["updateCron of an unknown entry", () => insp.updateCron({ id: "nope", spec: "@daily" }, ["spec"]), NotFoundError],
    ["getCron of no id", () => insp.getCron(""), InvalidArgumentError],
    ["pauseCron of an unknown entry", () => insp.pauseCron("nope"), NotFoundError],
    ["resumeCron of an unknown entry", () => insp.resumeCron("nope"), NotFoundError],
  ];
  for (const [name, call, cls] of cases) {
    const err = await rejects(call());
    assert.ok(err instanceof cls, `${name}: ${err}`);
  }
  await insp.deleteCron("a");
});

test("tasks enqueued into a group are listed as one waiting group", async () => {
  await client.enqueueJSON("digest", {}, { queue: "digests", group: "daily" });
  await client.enqueueJSON("digest", {}, { queue: "digests", group: "daily" });
  await client.enqueueJSON("digest", {}, { queue: "digests-other", group: "daily" });
  const gs = await insp.listGroups("digests");
  assert.equal(gs.length, 1);
  const g = gs[0];
  assert.deepEqual([g.queue, g.group, g.type, g.size], ["digests", "daily", "digest", 2]);
  assert.ok(timestampMs(g.lastEnqueuedAt) >= timestampMs(g.firstEnqueuedAt));
  assert.ok(timestampMs(g.firesAt) > timestampMs(g.firstEnqueuedAt));
  assert.equal((await insp.listGroups()).filter((x) => x.queue.startsWith("digests")).length, 2, "every queue's");
  assert.ok((await rejects(insp.listGroups("no good"))) instanceof InvalidArgumentError);
});

test("a queue's history counts its enqueues and attempts at once; its stats give its latency and durations", async (t) => {
  await client.enqueueJSON("t", {}, { queue: "h-emails" });
  await client.enqueueJSON("t", {}, { queue: "h-emails" });
  const sum = (points, field) => points.reduce((n, p) => n + p[field], 0n);
  for (const [name, resolution] of [["minute", HistoryResolution.MINUTE], ["day", HistoryResolution.DAY]]) {
    const points = await insp.getQueueHistory("h-emails", resolution);
    assert.ok(points.length > 0, `points by ${name}`);
    assert.equal(sum(points, "enqueued"), 2n, `enqueued by ${name}`);
    assert.equal(points.at(-1).enqueued, 2n, `the latest ${name}, still filling, holds them`);
    assert.ok(timestampMs(points.at(-1).start) <= Date.now(), `the latest ${name} has begun`);
  }
  assert.ok(sum(await insp.getQueueHistory(""), "enqueued") >= 2n, "every queue, summed");

  const waiting = await insp.getQueueStats("h-emails");
  assert.ok(waiting.oldestReadyAt !== undefined, "two tasks ready: an oldest one");
  assert.ok(durationMs(waiting.latency) >= 0, "its latency");
  assert.ok(waiting.observedSince !== undefined);

  const worker = new Worker({ url: server.url, queues: { "h-emails": 1 } });
  worker.handle("t", () => "done");
  const running = worker.run();
  t.after(async () => {
    await worker.stop();
    await running;
  });
  const done = await waitFor(async () => {
    const points = await insp.getQueueHistory("h-emails");
    return sum(points, "completed") === 2n ? points : undefined;
  }, "both attempts in the history");
  assert.equal(sum(done, "failed"), 0n);
  // A node observes a run's duration as it takes the result, not in the
  // commit that counts it: wait for both.
  const ran = await waitFor(async () => {
    const st = await insp.getQueueStats("h-emails");
    return st.types.find((s) => s.type === "t")?.run?.count === 2n ? st : undefined;
  }, "both runs in the stats");
  assert.equal(ran.oldestReadyAt, undefined, "nothing ready after both ran");
  assert.equal(durationMs(ran.latency ?? { seconds: 0n, nanos: 0 }), 0);
  assert.equal(ran.wait?.count, 2n, "both waits observed");
  assert.ok(durationMs(ran.types.find((s) => s.type === "t").run.p95) >= 0, "a run p95");

  assert.ok((await rejects(insp.getQueueHistory("never-used"))) instanceof NotFoundError, "history of an unknown queue");
  assert.ok((await rejects(insp.getQueueStats("never-used"))) instanceof NotFoundError, "stats of an unknown queue");
});

test("a running Worker is listed, its release too, and draining the release marks both", async (t) => {
  const worker = new Worker({ url: server.url, queues: { work: 3 }, concurrency: 2, releaseId: "build-7", labels: { team: "a" } });
  worker.handle("t", () => "done");
  const running = worker.run();
  t.after(async () => {
    await worker.stop();
    await running;
  });
  const ws = await waitFor(async () => {
    const list = await insp.listWorkers();
    return list.length === 1 ? list : undefined;
  }, "the worker's session listed");
  const w = ws[0];
  assert.deepEqual(w.queues, { work: 3 });
  assert.equal(w.concurrency, 2);
  assert.equal(w.releaseId, "build-7");
  assert.equal(w.labels.team, "a");
  assert.equal(w.sdkVersion, VERSION);
  assert.deepEqual(w.types, ["t"]);
  assert.equal(w.draining, false);
  assert.ok(w.sessionId !== "" && w.connectedAt);

  let rs = await insp.listReleases();
  assert.deepEqual(rs.map((r) => [r.releaseId, r.sessions, r.draining]), [["build-7", 1, false]]);
  await insp.drainRelease("build-7");
  rs = await insp.listReleases();
  assert.equal(rs[0].draining, true);
  assert.equal((await insp.listWorkers())[0].draining, true);
  await insp.drainRelease("build-7");
  assert.ok((await rejects(insp.drainRelease("build-0"))) instanceof NotFoundError, "a release never seen");
  assert.ok((await rejects(insp.drainRelease(""))) instanceof InvalidArgumentError, "no release");
});

test("the one node is described, and the engine's counts hold the tasks enqueued", async () => {
  const c = await insp.getClusterInfo();
  assert.equal(c.nodes.length, 1);
  assert.equal(c.nodes[0].leader, true);
  assert.ok(c.nodes[0].startedAt && c.storageEngine !== "" && durationMs(c.uptime) > 0, "the node and the engine described");
  const b = await insp.getBrokerInfo();
  assert.equal(b.engine, c.storageEngine);
  assert.ok(b.dataPath !== "");
  const before = b.taskCounts.scheduled ?? 0n;
  await client.enqueueJSON("t", {}, { queue: "counted", processInMs: 3_600_000 });
  assert.equal((await insp.getBrokerInfo()).taskCounts.scheduled, before + 1n);
  assert.equal(typeof TaskState.SCHEDULED, "number");
});
