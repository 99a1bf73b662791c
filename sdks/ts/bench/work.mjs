// W3 for the TypeScript Worker: drain N pre-enqueued no-op tasks with one
// Worker of concurrency C and print tasks/s. Without --url it starts a
// server of this checkout (test/server.mjs) in a temporary data directory.
//
//   node bench/work.mjs [--url URL] [--token T] [--n 100000] [--concurrency 64]
//                       [--protocol grpc|connect] [--queue bench]
import { create } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { parseArgs } from "node:util";
import {
  AdminService,
  EnqueueBatchRequestSchema,
  TaskService,
  Worker,
  createTransport,
} from "../dist/index.js";

const { values } = parseArgs({
  options: {
    url: { type: "string" },
    token: { type: "string" },
    n: { type: "string", default: "100000" },
    concurrency: { type: "string", default: "64" },
    protocol: { type: "string", default: "grpc" },
    queue: { type: "string", default: "bench" },
  },
});
const n = Number(values.n);
const concurrency = Number(values.concurrency);
const queue = values.queue;

let server;
let url = values.url;
if (!url) {
  const { startServer } = await import("../test/server.mjs");
  server = await startServer();
  url = server.url;
}
const conn = { url, token: values.token, protocol: values.protocol };
const transport = createTransport(conn);
const tasks = createClient(TaskService, transport);
const admin = createClient(AdminService, transport);

// Prefill, 1000 per EnqueueBatch (the server's bound), 4 calls in flight.
const payload = new TextEncoder().encode("{}");
let next = 0;
async function producer() {
  for (;;) {
    const first = next;
    if (first >= n) return;
    next = Math.min(n, first + 1000);
    const items = [];
    for (let i = first; i < next; i++) items.push({ queue, type: "bench", payload, contentType: "application/json" });
    const res = await tasks.enqueueBatch(create(EnqueueBatchRequestSchema, { items, brief: true }));
    const failed = res.results.find((r) => r.error);
    if (failed) throw new Error(`prefill: ${failed.error}`);
  }
}
const p0 = performance.now();
await Promise.all([producer(), producer(), producer(), producer()]);
const prefillMs = performance.now() - p0;

let handled = 0;
let allHandled;
const done = new Promise((resolve) => (allHandled = resolve));
const worker = new Worker({ ...conn, queues: { [queue]: 1 }, concurrency });
worker.handle("bench", () => {
  if (++handled === n) allHandled();
});
const t0 = performance.now();
const running = worker.run();
await done;
// Every Result is reported once the queue has nothing active or pending.
for (;;) {
  const { queues } = await admin.listQueues({});
  const q = queues.find((x) => x.name === queue);
  if (q && q.pending === 0n && q.active === 0n) break;
  await new Promise((r) => setTimeout(r, 20));
}
const wallMs = performance.now() - t0;
await worker.stop();
await running;
await server?.cleanup();

const rate = (n / wallMs) * 1000;
process.stdout.write(
  `W3 ts worker: ${n} tasks, concurrency ${concurrency}, ${values.protocol}: ` +
    `${(wallMs / 1000).toFixed(2)}s, ${Math.round(rate)} tasks/s (prefill ${(prefillMs / 1000).toFixed(2)}s)\n`,
);
