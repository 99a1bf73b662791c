// The TypeScript SDK's conformance worker (CONTRACT.md "SDK conformance
// worker"): configured from the environment only, it handles the
// conformance.* task types, prints `ready <session_id>` on each Welcome
// and nothing else on stdout, drains on SIGTERM and exits 0, and exits 3
// with the error on stderr on a fatal session error. Its Hello lists the
// types it has handlers for and the release CONVEYOR_RELEASE_ID names,
// and it asks before it starts an at-most-once task; conformance.once
// appends each task's id to CONVEYOR_ONCE_LOG.
import { readFileSync } from "node:fs";
import { Worker } from "../dist/index.js";
import { batchTypesFromEnv, registerConformanceHandlers } from "./handlers.mjs";

function env(name, fallback) {
  const v = process.env[name];
  return v === undefined || v === "" ? fallback : v;
}

function queues(spec) {
  const out = {};
  for (const part of spec.split(",")) {
    if (part.trim() === "") continue;
    const [name, weight] = part.split("=");
    out[name.trim()] = weight === undefined ? 1 : Number(weight);
  }
  return out;
}

function main() {
  const options = {
    url: env("CONVEYOR_URL", ""),
    token: env("CONVEYOR_TOKEN", undefined),
    queues: queues(env("CONVEYOR_QUEUES", "default=1")),
    concurrency: Number(env("CONVEYOR_CONCURRENCY", "4")),
    drainTimeoutMs: Number(env("CONVEYOR_DRAIN_MS", "5000")),
    releaseId: env("CONVEYOR_RELEASE_ID", ""),
    onSession: (id) => process.stdout.write(`ready ${id}\n`),
  };
  const protocol = env("CONVEYOR_PROTOCOL", undefined);
  if (protocol) options.protocol = protocol;
  const ca = env("CONVEYOR_TLS_CA", undefined);
  if (ca) options.tlsCa = readFileSync(ca);
  const worker = new Worker(options);

  registerConformanceHandlers(worker, batchTypesFromEnv());

  process.on("SIGTERM", () => void worker.stop());
  worker.run().then(
    () => process.exit(0),
    (err) => {
      process.stderr.write(`conformance worker: ${err?.stack ?? err}\n`);
      process.exit(3);
    },
  );
}

try {
  main();
} catch (err) {
  process.stderr.write(`conformance worker: ${err?.stack ?? err}\n`);
  process.exit(3);
}
