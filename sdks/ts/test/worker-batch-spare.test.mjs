// A batch member stopped only because its batch was stopped for another
// member is given back (RELEASED), not failed: a server Cancel that named
// another member, or another member's timeout. The member the stop was
// for is failed (RETRY) as usual.
import assert from "node:assert/strict";
import { test } from "node:test";
import { TaskOutcome, Worker } from "../dist/index.js";
import { fakeServer, scripted } from "./fake-peer.mjs";
import { deferred } from "./worker-helpers.mjs";

const welcome = { sessionId: "S1", leaseTtl: { seconds: 60n } };

/** batch is a BatchDispatch of members (id and options). */
const batch = (...members) => ({
  frame: {
    case: "batchDispatch",
    value: { group: "g", tasks: members.map(([id, options]) => ({ id, type: "b", attemptId: `A-${id}`, options })) },
  },
});

/** runBatch serves steps to a worker whose batch handler waits for its signal, and gives the Results by task id. */
async function runBatch(t, steps) {
  const results = deferred();
  const fake = await fakeServer(scripted(welcome, steps, results));
  t.after(() => fake.close());
  const worker = new Worker({ url: fake.url, queues: { q: 1 }, drainTimeoutMs: 0 });
  worker.handleBatch("b", ({ signal }) =>
    new Promise((_, reject) => {
      if (signal.aborted) reject(signal.reason);
      signal.addEventListener("abort", () => reject(signal.reason));
    }),
  );
  const running = worker.run();
  const got = await results.promise;
  await worker.stop();
  await running;
  return Object.fromEntries(got.map((r) => [r.taskId, r]));
}

test("a Cancel of one member fails it and gives the others back", async (t) => {
  const cancel = { frame: { case: "cancel", value: { taskId: "M1" } } };
  const byId = await runBatch(t, [[[batch(["M1"], ["M2"]), cancel], 2]]);
  assert.equal(byId.M1.outcome, TaskOutcome.RETRY);
  assert.equal(byId.M2.outcome, TaskOutcome.RELEASED);
  assert.match(byId.M2.errorMsg, /^released: the server canceled another member of its batch: /);
});

test("one member's timeout fails it and gives the others back", async (t) => {
  const byId = await runBatch(t, [[[batch(["M1", { timeout: { nanos: 100_000_000 } }], ["M2"])], 2]]);
  assert.equal(byId.M1.outcome, TaskOutcome.RETRY);
  assert.match(byId.M1.errorMsg, /deadline exceeded/);
  assert.equal(byId.M2.outcome, TaskOutcome.RELEASED);
  assert.match(byId.M2.errorMsg, /^released: another member of its batch reached its timeout or deadline: /);
});
