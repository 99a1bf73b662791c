// What the Worker puts on the wire, seen by a small fake server: the real
// server never sends Ping, so a fake peer is the only way to send one and
// to read the Hello, heartbeats and Results frame by frame.
import assert from "node:assert/strict";
import http2 from "node:http2";
import { test } from "node:test";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { TaskOutcome, VERSION, Worker, WorkerService } from "../dist/index.js";
import { deferred, text } from "./worker-helpers.mjs";

async function fakeServer(session) {
  const server = http2.createServer(
    connectNodeAdapter({ routes: (router) => router.service(WorkerService, { session }) }),
  );
  const sessions = new Set();
  server.on("session", (s) => {
    sessions.add(s);
    s.once("close", () => sessions.delete(s));
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise((resolve) => {
        server.close(resolve);
        for (const s of sessions) s.destroy();
      }),
  };
}

for (const protocol of ["grpc", "connect"]) {
  test(`Hello, a tolerated Ping, heartbeats and the Result carry what the protocol asks (${protocol})`, async () => {
    const heartbeatSeen = deferred();
    const seen = { hello: undefined, heartbeats: [], result: undefined };
    const fake = await fakeServer(async function* (requests) {
      const it = requests[Symbol.asyncIterator]();
      const first = await it.next();
      if (seen.result) {
        await new Promise(() => {}); // the worker's reconnect: hold until the test ends
      }
      seen.hello = first.value.frame;
      yield { frame: { case: "welcome", value: { sessionId: "S1", heartbeatInterval: { nanos: 50_000_000 } } } };
      yield { frame: { case: "ping", value: {} } };
      yield {
        frame: {
          case: "dispatch",
          value: {
            attemptId: "A1",
            task: { id: "T1", type: "echo", payload: new TextEncoder().encode("p"), attemptId: "A1" },
          },
        },
      };
      for (;;) {
        const r = await it.next();
        if (r.done) return;
        const f = r.value.frame;
        if (f.case === "heartbeat") {
          seen.heartbeats.push(f.value);
          if (f.value.activeAttemptIds.includes("A1")) heartbeatSeen.resolve();
        }
        if (f.case === "result") {
          seen.result = f.value;
          return;
        }
      }
    });
    const worker = new Worker({
      url: fake.url,
      protocol,
      queues: { q1: 3 },
      concurrency: 2,
      labels: { host: "test" },
      reconnectBaseMs: 60_000,
    });
    worker.handle("echo", async ({ task }) => {
      await heartbeatSeen.promise;
      return task.payload;
    });
    worker.handleBatch("agg", () => {});
    const running = worker.run();
    try {
      await heartbeatSeen.promise;
      const { value: hello } = seen.hello;
      assert.deepEqual({ ...hello.queues }, { q1: 3 });
      assert.equal(hello.concurrency, 2);
      assert.deepEqual({ ...hello.labels }, { host: "test" });
      assert.equal(hello.sdkVersion, VERSION);
      assert.deepEqual(hello.batchTypes, ["agg"]);
      const hb = seen.heartbeats.find((h) => h.activeAttemptIds.includes("A1"));
      assert.deepEqual(hb.activeTaskIds, ["T1"]);
      await new Promise((resolve) => {
        const check = () => (seen.result ? resolve() : setTimeout(check, 10));
        check();
      });
      assert.equal(seen.result.taskId, "T1");
      assert.equal(seen.result.attemptId, "A1");
      assert.equal(seen.result.outcome, TaskOutcome.SUCCESS);
      assert.equal(text(seen.result.result), "p");
    } finally {
      await worker.stop();
      await running;
      await fake.close();
    }
  });
}
