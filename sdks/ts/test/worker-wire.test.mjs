// What the Worker puts on the wire, seen by a small fake server: the real
// server never sends Ping, so a fake peer is the only way to send one and
// to read the Hello, heartbeats and Results frame by frame.
import assert from "node:assert/strict";
import { test } from "node:test";
import { TaskOutcome, VERSION, Worker } from "../dist/index.js";
import { fakeServer } from "./fake-peer.mjs";
import { deferred, text } from "./worker-helpers.mjs";

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
      assert.deepEqual({ ...hello.labels }, { host: "test", pid: String(process.pid) });
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
