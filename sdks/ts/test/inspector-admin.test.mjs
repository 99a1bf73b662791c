// The Inspector's queue, cron, group, worker, release and cluster calls
// against a real server: each reads back as the call left it, and its
// refusals are the SDK's typed errors.
import assert from "node:assert/strict";
import { test } from "node:test";
import { durationMs, timestampMs } from "@bufbuild/protobuf/wkt";
import {
  AlreadyExistsError,
  FailedPreconditionError,
  HistoryResolution,
  InvalidArgumentError,
  NotFoundError,
  TaskState,
  VERSION,
  Worker,
} from "../dist/index.js";
import { inspectorEnv } from "./inspector-helpers.mjs";
import { rejects } from "./client-helpers.mjs";
import { runWorker, text, waitFor } from "./worker-helpers.mjs";

const env = inspectorEnv();

const bytes = (s) => new TextEncoder().encode(s);

test("a queue paused reads paused and resumed reads resumed; listQueues and getQueue see what it holds", async () => {
  await env.client.enqueueJSON("t", {}, { queue: "q-emails" });
  await env.client.enqueueJSON("t", {}, { queue: "q-reports" });

  const qs = (await env.insp.listQueues()).filter((q) => q.name.startsWith("q-"));
  assert.deepEqual(qs.map((q) => q.name), ["q-emails", "q-reports"], "sorted by name");
  assert.equal(qs[0].pending, 1n);
  assert.equal(qs[0].enqueued, 1n);
  assert.equal(qs[0].config?.concurrencyLimit, 1, "the effective concurrency limit");

  let q = await env.insp.pauseQueue("q-emails");
  assert.equal(q.name, "q-emails");
  assert.equal(q.paused, true);
  q = await env.insp.getQueue("q-emails");
  assert.equal(q.paused, true);
  assert.equal(q.pending, 1n);
  assert.equal((await env.insp.resumeQueue("q-emails")).paused, false);
  assert.equal((await env.insp.getQueue("q-emails")).paused, false);

  assert.ok((await rejects(env.insp.getQueue("never-used"))) instanceof NotFoundError, "getQueue of an unknown queue");
  assert.ok((await rejects(env.insp.getQueue("not valid"))) instanceof InvalidArgumentError, "getQueue of an invalid name");
  assert.ok((await rejects(env.insp.resumeQueue(""))) instanceof InvalidArgumentError, "resumeQueue of no name");
});

test("an empty queue is deleted; one that holds a task is refused", async () => {
  await env.client.enqueueJSON("t", {}, { queue: "busy" });
  assert.ok((await rejects(env.insp.deleteQueue("busy"))) instanceof FailedPreconditionError);
  assert.equal((await env.insp.pauseQueue("empty")).paused, true, "pauseQueue makes the queue");
  await env.insp.deleteQueue("empty");
  assert.ok((await rejects(env.insp.getQueue("empty"))) instanceof NotFoundError, "getQueue after deleteQueue");
  assert.ok((await rejects(env.insp.deleteQueue("empty"))) instanceof NotFoundError, "deleteQueue again");
  assert.ok((await rejects(env.insp.deleteQueue(""))) instanceof InvalidArgumentError, "deleteQueue of no name");
});

test("updateQueueConfig with settings changes only those; without, it replaces the whole", async () => {
  let got = await env.insp.updateQueueConfig({ queue: "cfg", maxActive: 5, concurrencyLimit: 7 }, ["maxActive"]);
  assert.equal(got.maxActive, 5);
  assert.equal(got.concurrencyLimit, 1, "concurrencyLimit was not among the settings");
  got = await env.insp.updateQueueConfig({ queue: "cfg", rateLimit: { perSecond: 50 } }, ["rateLimit.perSecond"]);
  assert.equal(got.rateLimit?.perSecond, 50);
  assert.equal(got.maxActive, 5, "kept");
  got = await env.insp.updateQueueConfig({ queue: "cfg", groupPolicy: { maxDelayMs: 90_000 }, push: { timeoutMs: 1500 } },
    ["groupPolicy.maxDelayMs", "push.timeoutMs"]);
  assert.equal(durationMs(got.groupPolicy.maxDelay), 90_000);
  assert.equal(durationMs(got.push.timeout), 1500);

  const eff = await env.insp.getQueueConfig("cfg");
  assert.equal(eff.maxActive, 5);
  assert.equal(eff.rateLimit?.burst, 50, "the effective burst is the rate's");
  assert.ok(eff.groupPolicy?.maxSize > 0, "the effective group policy holds the server's default");

  const stored = await env.insp.getStoredQueueConfig("cfg");
  assert.equal(stored.maxActive, 5);
  assert.equal(stored.rateLimit?.burst, 0, "the stored burst follows the default");
  assert.equal(stored.groupPolicy?.maxSize, 0);
  assert.equal(stored.maxWaiting, 0n);

  // A read-modify-write of the stored configuration keeps the rest.
  stored.maxWaiting = 100n;
  got = await env.insp.updateQueueConfig(stored);
  assert.equal(got.maxWaiting, 100n);
  assert.equal(got.maxActive, 5);
  assert.equal(durationMs(got.groupPolicy.maxDelay), 90_000);
  // A whole replace from the plain form: what is not given follows its default.
  got = await env.insp.updateQueueConfig({ queue: "cfg", maxWaiting: 7 });
  assert.deepEqual([got.maxWaiting, got.maxActive, got.rateLimit?.perSecond], [7n, 0, 0]);

  const cases = [
    ["a setting that is not one", () => env.insp.updateQueueConfig({ queue: "cfg" }, ["paused"])],
    ["a negative maxActive", () => env.insp.updateQueueConfig({ queue: "cfg", maxActive: -1 }, ["maxActive"])],
    ["a maxActive past 32 bits", () => env.insp.updateQueueConfig({ queue: "cfg", maxActive: 2 ** 32 }, ["maxActive"])],
    ["a fractional duration", () => env.insp.updateQueueConfig({ queue: "cfg", push: { timeoutMs: 0.5 } }, ["push.timeoutMs"])],
    ["an invalid queue", () => env.insp.updateQueueConfig({ queue: "no good", maxActive: 1 })],
    ["getQueueConfig of an invalid queue", () => env.insp.getQueueConfig("no good")],
  ];
  for (const [name, call] of cases) {
    const err = await rejects(call());
    assert.ok(err instanceof InvalidArgumentError, `${name}: ${err}`);
  }
  assert.equal((await env.insp.getQueueConfig("cfg")).maxWaiting, 7n, "the refused updates changed nothing");
});

test("a cron entry created, read, updated by field and whole, paused, resumed, listed and deleted", async () => {
  const e = await env.insp.createCron({
    id: "sync", spec: "@every 1h", type: "sync", payload: bytes('{"full":false}'),
    metadata: { team: "data" }, options: { priority: 7, timeoutMs: 30_000 },
  });
  assert.equal(e.id, "sync");
  assert.equal(e.queue, "default");
  assert.equal(e.options?.priority, 7);
  assert.equal(durationMs(e.options.timeout), 30_000);
  assert.equal(e.paused, false);
  assert.ok(e.nextRunAt && !e.lastRunAt, "a new entry's runs");

  let got = await env.insp.getCron("sync");
  assert.equal(got.spec, "@every 1h");
  assert.equal(text(got.payload), '{"full":false}');
  assert.deepEqual(got.metadata, { team: "data" });

  // One field at a time: the others keep their values.
  got = await env.insp.updateCron({ id: "sync", spec: "@every 2h" }, ["spec"]);
  assert.equal(got.spec, "@every 2h");
  assert.equal(got.type, "sync", "type kept");
  assert.equal(got.options?.priority, 7, "priority kept");
  assert.ok(timestampMs(got.nextRunAt) > timestampMs(e.nextRunAt), "the next run after a longer spec");
  const next = timestampMs(got.nextRunAt);
  got = await env.insp.updateCron({ id: "sync", options: { priority: 3 } }, ["options.priority"]);
  assert.equal(got.options?.priority, 3);
  assert.equal(durationMs(got.options.timeout), 30_000, "the other options kept");
  assert.equal(got.spec, "@every 2h");
  assert.equal(timestampMs(got.nextRunAt), next, "the next run kept by a template change");

  got = await env.insp.pauseCron("sync");
  assert.equal(got.paused, true);
  assert.equal(got.nextRunAt, undefined);
  assert.equal((await env.insp.getCron("sync")).paused, true);
  got = await env.insp.resumeCron("sync");
  assert.equal(got.paused, false);
  assert.ok(got.nextRunAt);

  // A read-modify-write of the entry as read.
  got.metadata.owner = "ops";
  got = await env.insp.updateCron(got);
  assert.deepEqual(got.metadata, { team: "data", owner: "ops" });
  assert.equal(got.options?.priority, 3);
  // A whole replace: paused is the entry's, and every field not given is cleared.
  got = await env.insp.updateCron({ id: "sync", spec: "@daily", type: "sync:full", paused: true });
  assert.equal(got.type, "sync:full");
  assert.equal(got.paused, true);
  assert.equal(got.options?.priority ?? 0, 0);
  assert.deepEqual(got.metadata, {});

  const other = await env.insp.createCron({ spec: "0 3 * * *", type: "report", queue: "cron-reports", paused: true });
  assert.ok(other.id !== "" && other.paused && other.nextRunAt === undefined, "created without an id, paused");
  const list = await env.insp.listCrons();
  assert.deepEqual(Object.fromEntries(list.map((x) => [x.id, x.type])), { sync: "sync:full", [other.id]: "report" });
  // A queue a cron entry enqueues into cannot be deleted, even empty.
  await env.insp.pauseQueue("cron-reports");
  const refused = await rejects(env.insp.deleteQueue("cron-reports"));
  assert.ok(refused instanceof FailedPreconditionError);
  assert.match(refused.message, new RegExp(other.id));

  await env.insp.deleteCron("sync");
  assert.ok((await rejects(env.insp.getCron("sync"))) instanceof NotFoundError, "getCron after deleteCron");
  assert.ok((await rejects(env.insp.deleteCron("sync"))) instanceof NotFoundError, "deleteCron again");
  assert.deepEqual((await env.insp.listCrons()).map((x) => x.id), [other.id]);
  await env.insp.deleteCron(other.id);
});

test("the cron calls' refusals are the SDK's typed errors", async () => {
  await env.insp.createCron({ id: "a", spec: "@hourly", type: "t" });
  const cases = [
    ["createCron of a taken id", () => env.insp.createCron({ id: "a", spec: "@hourly", type: "t" }), AlreadyExistsError],
    ["createCron of a bad spec", () => env.insp.createCron({ spec: "every so often", type: "t" }), InvalidArgumentError],
    ["createCron of no type", () => env.insp.createCron({ spec: "@hourly" }), InvalidArgumentError],
    ["createCron of a fixed time", () => env.insp.createCron({ spec: "@hourly", type: "t", options: { deadline: new Date() } }), InvalidArgumentError],
    ["createCron of a bad option", () => env.insp.createCron({ spec: "@hourly", type: "t", options: { priority: 12 } }), InvalidArgumentError],
    ["updateCron of the pause by field", () => env.insp.updateCron({ id: "a", paused: true }, ["paused"]), InvalidArgumentError],
    ["updateCron of an unknown option", () => env.insp.updateCron({ id: "a" }, ["options.nope"]), InvalidArgumentError],
    ["updateCron of an unknown entry", () => env.insp.updateCron({ id: "nope", spec: "@daily" }, ["spec"]), NotFoundError],
    ["getCron of no id", () => env.insp.getCron(""), InvalidArgumentError],
    ["pauseCron of an unknown entry", () => env.insp.pauseCron("nope"), NotFoundError],
    ["resumeCron of an unknown entry", () => env.insp.resumeCron("nope"), NotFoundError],
  ];
  for (const [name, call, cls] of cases) {
    const err = await rejects(call());
    assert.ok(err instanceof cls, `${name}: ${err}`);
  }
  await env.insp.deleteCron("a");
});

test("tasks enqueued into a group are listed as one waiting group", async () => {
  await env.client.enqueueJSON("digest", {}, { queue: "digests", group: "daily" });
  await env.client.enqueueJSON("digest", {}, { queue: "digests", group: "daily" });
  await env.client.enqueueJSON("digest", {}, { queue: "digests-other", group: "daily" });
  const gs = await env.insp.listGroups("digests");
  assert.equal(gs.length, 1);
  const g = gs[0];
  assert.deepEqual([g.queue, g.group, g.type, g.size], ["digests", "daily", "digest", 2]);
  assert.ok(timestampMs(g.lastEnqueuedAt) >= timestampMs(g.firstEnqueuedAt));
  assert.ok(timestampMs(g.firesAt) > timestampMs(g.firstEnqueuedAt));
  assert.equal((await env.insp.listGroups()).filter((x) => x.queue.startsWith("digests")).length, 2, "every queue's");
  assert.ok((await rejects(env.insp.listGroups("no good"))) instanceof InvalidArgumentError);
});

test("a queue's history counts its enqueues and attempts at once; its stats give its latency and durations", async (t) => {
  const before = Date.now();
  await env.client.enqueueJSON("t", {}, { queue: "h-emails" });
  await env.client.enqueueJSON("t", {}, { queue: "h-emails" });
  const sum = (points, field) => points.reduce((n, p) => n + p[field], 0n);
  for (const [name, resolution] of [["minute", HistoryResolution.MINUTE], ["day", HistoryResolution.DAY]]) {
    const points = await env.insp.getQueueHistory("h-emails", resolution);
    assert.ok(points.length > 0, `points by ${name}`);
    assert.equal(sum(points, "enqueued"), 2n, `enqueued by ${name}`);
    assert.equal(points.at(-1).enqueued, 2n, `the latest ${name}, still filling, holds them`);
    assert.ok(timestampMs(points.at(-1).start) <= Date.now(), `the latest ${name} has begun`);
  }
  assert.ok(sum(await env.insp.getQueueHistory(""), "enqueued") >= 2n, "every queue, summed");

  const waiting = await env.insp.getQueueStats("h-emails");
  const readyAt = timestampMs(waiting.oldestReadyAt ?? { seconds: 0n, nanos: 0 });
  assert.ok(readyAt >= before - 1000 && readyAt <= Date.now(), `two tasks ready: the oldest became ready at ${readyAt}, since ${before}`);
  assert.ok(waiting.latency !== undefined && durationMs(waiting.latency) <= Date.now() - readyAt + 1000, "its latency, from then");
  assert.ok(waiting.observedSince !== undefined);

  const worker = new Worker({ url: env.server.url, queues: { "h-emails": 1 } });
  worker.handle("t", () => "done");
  runWorker(t, worker);
  const done = await waitFor(async () => {
    const points = await env.insp.getQueueHistory("h-emails");
    return sum(points, "completed") === 2n ? points : undefined;
  }, "both attempts in the history");
  assert.equal(sum(done, "failed"), 0n);
  // A node observes a run's duration as it takes the result, not in the
  // commit that counts it: wait for both.
  const ran = await waitFor(async () => {
    const st = await env.insp.getQueueStats("h-emails");
    return st.types.find((s) => s.type === "t")?.run?.count === 2n ? st : undefined;
  }, "both runs in the stats");
  assert.equal(ran.oldestReadyAt, undefined, "nothing ready after both ran");
  assert.equal(durationMs(ran.latency ?? { seconds: 0n, nanos: 0 }), 0);
  assert.equal(ran.wait?.count, 2n, "both waits observed");
  const run = ran.types.find((s) => s.type === "t").run;
  assert.ok(run.p50 !== undefined && run.p95 !== undefined && durationMs(run.p50) <= durationMs(run.p95), "run p50 and p95, in order");

  assert.ok((await rejects(env.insp.getQueueHistory("never-used"))) instanceof NotFoundError, "history of an unknown queue");
  assert.ok((await rejects(env.insp.getQueueStats("never-used"))) instanceof NotFoundError, "stats of an unknown queue");
});

test("a running Worker is listed, its release too, and draining the release marks both", async (t) => {
  const worker = new Worker({ url: env.server.url, queues: { work: 3 }, concurrency: 2, releaseId: "build-7", labels: { team: "a" } });
  worker.handle("t", () => "done");
  runWorker(t, worker);
  const ws = await waitFor(async () => {
    const list = await env.insp.listWorkers();
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

  let rs = await env.insp.listReleases();
  assert.deepEqual(rs.map((r) => [r.releaseId, r.sessions, r.draining]), [["build-7", 1, false]]);
  await env.insp.drainRelease("build-7");
  rs = await env.insp.listReleases();
  assert.equal(rs[0].draining, true);
  assert.equal((await env.insp.listWorkers())[0].draining, true);
  await env.insp.drainRelease("build-7");
  assert.ok((await rejects(env.insp.drainRelease("build-0"))) instanceof NotFoundError, "a release never seen");
  assert.ok((await rejects(env.insp.drainRelease(""))) instanceof InvalidArgumentError, "no release");
});

test("the one node is described, and the engine's counts hold the tasks enqueued", async () => {
  const c = await env.insp.getClusterInfo();
  assert.equal(c.nodes.length, 1);
  assert.equal(c.nodes[0].leader, true);
  assert.ok(c.nodes[0].startedAt && c.storageEngine !== "" && durationMs(c.uptime) > 0, "the node and the engine described");
  const b = await env.insp.getBrokerInfo();
  assert.equal(b.engine, c.storageEngine);
  assert.ok(b.dataPath !== "");
  const before = b.taskCounts.scheduled ?? 0n;
  await env.client.enqueueJSON("t", {}, { queue: "counted", processInMs: 3_600_000 });
  assert.equal((await env.insp.getBrokerInfo()).taskCounts.scheduled, before + 1n);
  assert.equal(typeof TaskState.SCHEDULED, "number");
});
