// The conformance worker (CONTRACT.md "SDK conformance worker") as the
// cross-SDK suite runs it: a child process configured by environment.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { startServer } from "./server.mjs";
import { TaskState, clients, enqueue, text, waitFor, waitState } from "./worker-helpers.mjs";

const script = join(dirname(fileURLToPath(import.meta.url)), "../conformance/worker.mjs");

function startWorker(env) {
  const child = spawn(process.execPath, [script], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const out = [];
  let err = "";
  createInterface({ input: child.stdout }).on("line", (l) => out.push(l));
  child.stderr.on("data", (d) => (err += d));
  const exited = new Promise((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })));
  return { child, out, stderr: () => err, exited };
}

for (const protocol of ["grpc", "connect"]) {
  test(`the conformance worker handles the conformance types and drains on SIGTERM (${protocol})`, async () => {
    const server = await startServer();
    const c = clients(server.url);
    const dir = mkdtempSync(join(tmpdir(), "conveyor-ts-once-"));
    const onceLog = join(dir, "once.log");
    const w = startWorker({
      CONVEYOR_ONCE_LOG: onceLog,
      CONVEYOR_RELEASE_ID: `conf-${protocol}`,
      CONVEYOR_URL: server.url,
      CONVEYOR_PROTOCOL: protocol,
      CONVEYOR_QUEUES: "default=1,other=2",
      CONVEYOR_CONCURRENCY: "4",
      CONVEYOR_BATCH_TYPES: "conformance.batch",
      CONVEYOR_DRAIN_MS: "200",
    });
    try {
      await waitFor(() => w.out.length > 0, "the ready line");
      assert.match(w.out[0], /^ready [0-9A-Z]{26}$/);
      const { workers } = await c.admin.listWorkers({});
      assert.equal(workers.length, 1);
      assert.equal(workers[0].releaseId, `conf-${protocol}`);
      assert.ok(workers[0].types.includes("conformance.once"), `types ${workers[0].types}`);
      assert.equal(workers[0].startAuthorization, true);
      const json = (v) => JSON.stringify(v);
      const echo = await waitState(c.tasks, await enqueue(c.tasks, "conformance.echo", json({ x: 1 })), TaskState.COMPLETED);
      assert.equal(text(echo.result), '{"x":1}');
      const fail = await waitState(c.tasks, await enqueue(c.tasks, "conformance.fail", json({ message: "boom" })), TaskState.RETRY);
      assert.match(fail.lastError, /boom/);
      const skip = await waitState(c.tasks, await enqueue(c.tasks, "conformance.skip", json({ message: "nope" })), TaskState.ARCHIVED);
      assert.match(skip.lastError, /nope/);
      await waitState(c.tasks, await enqueue(c.tasks, "conformance.panic", "{}"), TaskState.RETRY);
      await waitState(c.tasks, await enqueue(c.tasks, "conformance.sleep", json({ ms: 10 })), TaskState.COMPLETED);
      const prog = await waitState(c.tasks, await enqueue(c.tasks, "conformance.progress", "{}"), TaskState.COMPLETED);
      assert.ok(prog.progressPercent >= 50);
      const b = await waitState(c.tasks, await enqueue(c.tasks, "conformance.batch", json({ m: 1 })), TaskState.COMPLETED);
      assert.equal(text(b.result), '{"m":1}');
      const once = [];
      for (const atMostOnce of [false, true]) {
        const id = await enqueue(c.tasks, "conformance.once", "{}", { options: { atMostOnce } });
        once.push(id);
        await waitState(c.tasks, id, TaskState.COMPLETED);
      }
      assert.equal(readFileSync(onceLog, "utf8"), once.map((id) => `${id}\n`).join(""));

      const long = await enqueue(c.tasks, "conformance.sleep", json({ ms: 600_000 }));
      await waitState(c.tasks, long, TaskState.ACTIVE);
      w.child.kill("SIGTERM");
      const { code } = await w.exited;
      assert.equal(code, 0, w.stderr());
      const t = await c.tasks.getTask({ id: long });
      assert.equal(t.state, TaskState.PENDING);
      assert.equal(t.retried, 0);
      assert.ok(w.out.every((l) => /^ready \S+$/.test(l)), `stdout: ${w.out}`);
    } finally {
      w.child.kill("SIGKILL");
      await server.cleanup();
      rmSync(dir, { recursive: true, force: true });
    }
  });
}

test("the conformance worker exits 3 on a fatal session error", async () => {
  const server = await startServer(["--token", "right"]);
  try {
    const w = startWorker({ CONVEYOR_URL: server.url, CONVEYOR_TOKEN: "wrong" });
    const { code } = await w.exited;
    assert.equal(code, 3);
    assert.match(w.stderr(), /Unauthenticated|unauthenticated/);
    assert.deepEqual(w.out, []);
  } finally {
    await server.cleanup();
  }
});
