// The TypeScript producer's W2 "gathered": CONCURRENCY producers share one
// Client and each enqueues, one call after another, until N tasks are
// stored, as `conveyor bench --workload W2` does with the Go SDK (queue
// and type "bench", the 128-byte JSON payload). Prints one JSON line with
// tasks/s.
//
//   npm run build && CONVEYOR_URL=http://127.0.0.1:7420 N=20000 CONCURRENCY=32 node bench/enqueue.mjs
//
// Without CONVEYOR_URL it starts a fresh server from this checkout (as the
// tests do) and stops it after. CONVEYOR_TOKEN, CONVEYOR_PROTOCOL (grpc or
// connect), BATCHING=0 (one RPC per call) and IN_FLIGHT (the Client's
// enqueueInFlight, default 2) are optional.
import { Client } from "../dist/index.js";

const n = Number(process.env.N ?? 20_000);
const concurrency = Number(process.env.CONCURRENCY ?? 32);
const protocol = process.env.CONVEYOR_PROTOCOL ?? "grpc";
const batching = process.env.BATCHING !== "0";

const PAYLOAD_SIZE = 128;
const frame = (seq, ns, pad) => `{"seq":"${String(seq).padStart(12, "0")}","enq_ns":"${String(ns).padStart(19, "0")}","pad":"${pad}"}`;
const pad = "x".repeat(PAYLOAD_SIZE - frame(0, 0, "").length);
const encoder = new TextEncoder();
const start = process.hrtime.bigint();
const payload = (seq) => encoder.encode(frame(seq, process.hrtime.bigint() - start, pad));

let server;
let url = process.env.CONVEYOR_URL;
if (!url) {
  const { startServer } = await import("../test/server.mjs");
  server = await startServer();
  url = server.url;
}
try {
  const enqueueInFlight = Number(process.env.IN_FLIGHT ?? 2);
  const client = new Client({ url, token: process.env.CONVEYOR_TOKEN, protocol, batching, enqueueInFlight });
  let next = 0;
  const producer = async () => {
    for (let seq = next++; seq < n; seq = next++) {
      await client.enqueue("bench", payload(seq), { queue: "bench" });
    }
  };
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await Promise.all(Array.from({ length: concurrency }, producer));
  const wallS = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const stats = client.stats();
  await client.close();
  console.log(
    JSON.stringify({
      peer: "conveyor-ts",
      workload: "W2",
      label: batching ? "gathered" : "unbatched",
      protocol,
      n,
      concurrency,
      wall_s: Number(wallS.toFixed(3)),
      tasks_per_s: Math.round(n / wallS),
      rpcs: stats.enqueueRpcs,
      cpu_bench_pct: Math.round(((cpu.user + cpu.system) / 1e4 / wallS)),
    }),
  );
} finally {
  await server?.cleanup();
}
