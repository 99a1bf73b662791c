// Helpers of the Worker's tests: clients of the real server's task and
// admin services, and a bounded wait on a condition.
import { create } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import {
  AdminService,
  EnqueueRequestSchema,
  TaskService,
  TaskState,
  createTransport,
} from "../dist/index.js";

export { TaskState };

/** clients makes the task and admin clients of a server. */
export function clients(url, token) {
  const transport = createTransport({ url, token });
  return { tasks: createClient(TaskService, transport), admin: createClient(AdminService, transport) };
}

/** enqueue enqueues one task and returns its id. */
export async function enqueue(tasks, type, payload, extra = {}) {
  const bytes = typeof payload === "string" ? new TextEncoder().encode(payload) : payload ?? new Uint8Array(0);
  const res = await tasks.enqueue(create(EnqueueRequestSchema, { type, payload: bytes, ...extra }));
  return res.task.id;
}

/** runWorker runs worker until the end of test t, then stops it and waits for run to end. */
export function runWorker(t, worker) {
  const running = worker.run();
  t.after(async () => {
    await worker.stop();
    await running;
  });
}

/** waitFor polls fn (every 50ms) until it returns a truthy value, at most ms. */
export async function waitFor(fn, what, ms = 20_000) {
  const end = Date.now() + ms;
  let last;
  for (;;) {
    last = await fn();
    if (last) return last;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** waitState waits for a task to reach state and returns its TaskInfo. */
export function waitState(tasks, id, state, ms) {
  return waitFor(async () => {
    const t = await tasks.getTask({ id });
    return t.state === state ? t : undefined;
  }, `task ${id} in state ${TaskState[state]}`, ms);
}

/** deferred is a promise with its resolve function. */
export function deferred() {
  let resolve;
  const promise = new Promise((r) => (resolve = r));
  return { promise, resolve };
}

/** untilAborted resolves with the signal's reason once it aborts. */
export function untilAborted(signal) {
  return new Promise((resolve) => {
    if (signal.aborted) resolve(signal.reason);
    else signal.addEventListener("abort", () => resolve(signal.reason), { once: true });
  });
}

export const text = (bytes) => new TextDecoder().decode(bytes);
