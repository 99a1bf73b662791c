// The conformance task types (CONTRACT.md "SDK conformance worker"), shared
// by the session worker (worker.mjs) and the push worker (pushworker.mjs)
// so that both serve exactly the same handlers.
import { SkipRetry } from "../dist/index.js";

function jsonOf(task) {
  return JSON.parse(new TextDecoder().decode(task.payload));
}

function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    function onAbort() {
      clearTimeout(t);
      reject(signal.reason);
    }
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * batchTypesFromEnv is the comma-separated CONVEYOR_BATCH_TYPES: the types
 * that get a batch handler.
 */
export function batchTypesFromEnv() {
  return (process.env.CONVEYOR_BATCH_TYPES ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "");
}

/** registerConformanceHandlers registers the conformance.* handlers on worker. */
export function registerConformanceHandlers(worker, batchTypes = []) {
  worker.handle("conformance.echo", ({ task }) => task.payload);
  worker.handle("conformance.fail", ({ task }) => {
    throw new Error(jsonOf(task).message);
  });
  worker.handle("conformance.skip", ({ task }) => {
    throw new SkipRetry(jsonOf(task).message);
  });
  worker.handle("conformance.panic", () => {
    throw new Error("conformance.panic: an uncaught exception from the handler");
  });
  worker.handle("conformance.sleep", async ({ task, signal }) => {
    await sleep(Number(jsonOf(task).ms), signal);
  });
  worker.handle("conformance.progress", ({ progress }) => {
    progress(50, "half");
  });
  // A member redelivered alone (after RETRY or RELEASED) comes as a plain
  // Dispatch; it gets the same answer as in a batch.
  worker.handle("conformance.batch", ({ task }) => task.payload);
  for (const type of batchTypes) {
    worker.handleBatch(type, ({ tasks }) => tasks.map((t) => t.payload));
  }
}
