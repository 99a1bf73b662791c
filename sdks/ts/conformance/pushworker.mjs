// The TypeScript SDK's push worker: the conformance task types (the same
// handlers as worker.mjs) served to a Conveyor server's push requests
// through createPushHandler's Node face. Configured from the environment:
//   CONVEYOR_PUSH_LISTEN   host:port to listen on (default 127.0.0.1:0, a free port)
//   CONVEYOR_PUSH_SECRET   the server's secrets, comma-separated whsec_<base64>
//   CONVEYOR_PUSH_DEV=1    accept unsigned requests when no secret is set
//   CONVEYOR_BATCH_TYPES   types that get a batch handler (as worker.mjs)
//   CONVEYOR_DRAIN_MS      how long SIGTERM lets running requests finish (default 5000)
//   CONVEYOR_ONCE_LOG      the file conformance.once appends each task's id to (as worker.mjs)
// It prints exactly `listening http://<host:port>` on stdout once bound,
// and nothing else; exits 0 on SIGTERM once the server is closed; exits 2
// with the error on stderr when it cannot start (no secret and no
// CONVEYOR_PUSH_DEV=1, a bad secret, an address it cannot bind).
import { createServer } from "node:http";
import { Worker, createPushHandler } from "../dist/index.js";
import { batchTypesFromEnv, registerConformanceHandlers } from "./handlers.mjs";

function fail(err) {
  process.stderr.write(`push worker: ${err?.message ?? err}\n`);
  process.exit(2);
}

function parseListen(spec) {
  const m = /^(?:\[([^\]]+)\]|([^:]*)):(\d+)$/.exec(spec);
  if (!m) throw new Error(`CONVEYOR_PUSH_LISTEN ${JSON.stringify(spec)} is not host:port`);
  return { host: m[1] ?? m[2], port: Number(m[3]) };
}

function main() {
  const { host, port } = parseListen(process.env.CONVEYOR_PUSH_LISTEN || "127.0.0.1:0");
  const worker = new Worker({}); // push only: no session, so no server URL
  registerConformanceHandlers(worker, batchTypesFromEnv());
  const push = createPushHandler(worker, { developmentMode: process.env.CONVEYOR_PUSH_DEV === "1" });
  const drainMs = Number(process.env.CONVEYOR_DRAIN_MS || "5000");

  const server = createServer(push.node);
  server.once("error", fail);
  server.listen(port, host, () => {
    const a = server.address();
    const h = a.family === "IPv6" ? `[${a.address}]` : a.address;
    process.stdout.write(`listening http://${h}:${a.port}\n`);
  });
  process.once("SIGTERM", () => {
    // Stop accepting; running requests get drainMs, then their connections
    // are cut (their handlers' signals abort, and the server retries them).
    const cut = setTimeout(() => server.closeAllConnections(), drainMs);
    cut.unref();
    server.close(() => process.exit(0));
    server.closeIdleConnections();
  });
}

try {
  main();
} catch (err) {
  fail(err);
}
