// The conformance task types (CONTRACT.md "SDK conformance worker"), shared
// by the session worker (worker.mjs) and the push worker (pushworker.mjs)
// so that both serve exactly the same handlers.
import { open } from "node:fs/promises";
import { SkipRetry } from "../dist/index.js";

/** ONCE_LOG_ENV names the file conformance.once appends to. */
export const ONCE_LOG_ENV = "CONVEYOR_ONCE_LOG";

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

/**
 * appendOnce appends one line, the task's id, to the file at path, and
 * resolves once the line is on disk: a test that enqueues at-most-once
 * tasks counts each id's lines to tell how many times each ran, whatever
 * became of the worker after. One write of one whole line to a file
 * opened for appending lands at its end whole, beside other workers
 * appending to the same file.
 */
async function appendOnce(path, task) {
  if (!path) throw new SkipRetry(`${ONCE_LOG_ENV} is not set: conformance.once has no file to append to`);
  const f = await open(path, "a");
  try {
    await f.write(`${task.id}\n`);
    await f.sync();
  } finally {
    await f.close();
  }
}

/**
 * registerConformanceHandlers registers the conformance.* handlers on
 * worker; conformance.once appends to onceLog (default CONVEYOR_ONCE_LOG).
 */
export function registerConformanceHandlers(worker, batchTypes = [], onceLog = process.env[ONCE_LOG_ENV] ?? "") {
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
  worker.handle("conformance.once", ({ task }) => appendOnce(onceLog, task));
  // A member redelivered alone (after RETRY or RELEASED) comes as a plain
  // Dispatch; it gets the same answer as in a batch.
  worker.handle("conformance.batch", ({ task }) => task.payload);
  for (const type of batchTypes) {
    worker.handleBatch(type, ({ tasks }) => tasks.map((t) => t.payload));
  }
}
