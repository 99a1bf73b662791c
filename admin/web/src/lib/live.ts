// Live queue numbers: one poll of ListQueues about once a second while a
// page shows them. ListQueues reads the server's in-memory counters (the
// ones /metrics reads), never a scan, so polling it costs the server
// nothing that grows with the number of tasks. Rates are deltas of the
// persisted totals between two polls: the figures "now". The charts are
// drawn from the history the server keeps (lib/history.ts), not from
// these polls.
import { useEffect } from "preact/hooks";
import type { ConnectError } from "@connectrpc/connect";
import type { QueueInfo } from "../gen/conveyor/v1/admin_pb";
import { admin, asError } from "./api";
import { store, useStore } from "./store";

/** POLL_MS is the refresh period of the live numbers. */
export const POLL_MS = 1000;

/** Rates are a queue's throughput, per second. */
export interface Rates {
  enqueued: number;
  completed: number;
  failed: number;
}

/** Live is the latest poll. */
export interface Live {
  queues: QueueInfo[] | undefined;
  error: ConnectError | undefined;
  /** at is when the latest answer arrived (ms since the epoch), 0 before. */
  at: number;
  rates: Map<string, Rates>;
  total: Rates;
  /**
   * rated says whether rates and total measure something: the latest two
   * answers came close enough apart (not across a hidden tab).
   */
  rated: boolean;
}

const zero: Rates = { enqueued: 0, completed: 0, failed: 0 };

/** live is the shared state of the poller. */
export const live = store<Live>({
  queues: undefined,
  error: undefined,
  at: 0,
  rates: new Map(),
  total: zero,
  rated: false,
});

interface Sample {
  at: number;
  totals: Map<string, { enqueued: number; processed: number; failed: number }>;
}

let previous: Sample | undefined;
let users = 0;
let timer: ReturnType<typeof setTimeout> | undefined;
let inFlight = false;
// again is set by a refresh asked for while a poll runs (after an action):
// that poll's answer may predate the action, so another follows at once.
let again = false;

// delta is how much a persisted total grew; a server that restarted with a
// lower count (a new data directory) counts as no growth.
const delta = (a: number, b: number) => Math.max(0, b - a);

function record(queues: QueueInfo[], at: number): void {
  const state = live.get();
  if (previous && at - previous.at < POLL_MS / 2) {
    // A poll right after an action: new counts, but too short an interval
    // for a rate worth charting.
    live.set({ ...state, queues, error: undefined, at });
    return;
  }
  const cur: Sample = { at, totals: new Map() };
  for (const q of queues) {
    cur.totals.set(q.name, { enqueued: Number(q.enqueued), processed: Number(q.processed), failed: Number(q.failed) });
  }
  const rates = new Map<string, Rates>();
  const total: Rates = { enqueued: 0, completed: 0, failed: 0 };
  const prev = previous;
  // A gap (the page was hidden, the server slow) measures nothing rather
  // than an average over the gap.
  const gap = !prev || at - prev.at > 3 * POLL_MS;
  if (prev && !gap) {
    const dt = (at - prev.at) / 1000;
    for (const [name, c] of cur.totals) {
      const p = prev.totals.get(name) ?? { enqueued: c.enqueued, processed: c.processed, failed: c.failed };
      const failed = delta(p.failed, c.failed) / dt;
      const processed = delta(p.processed, c.processed) / dt;
      const r = { enqueued: delta(p.enqueued, c.enqueued) / dt, completed: Math.max(0, processed - failed), failed };
      rates.set(name, r);
      total.enqueued += r.enqueued;
      total.completed += r.completed;
      total.failed += r.failed;
    }
  }
  previous = cur;
  live.set({ queues, error: undefined, at, rates, total, rated: !gap });
}

async function poll(): Promise<void> {
  if (inFlight) {
    again = true;
    return;
  }
  inFlight = true;
  again = false;
  clearTimeout(timer);
  try {
    const res = await admin.listQueues({});
    record(res.queues, Date.now());
  } catch (err) {
    live.set({ ...live.get(), error: asError(err) });
  } finally {
    inFlight = false;
  }
  if (again && users > 0) void poll();
  else schedule();
}

function schedule(): void {
  clearTimeout(timer);
  if (users > 0 && !document.hidden) timer = setTimeout(() => void poll(), POLL_MS);
}

document.addEventListener("visibilitychange", () => {
  if (!document.hidden && users > 0) void poll();
});

/** refreshQueues polls now, after an action changed the counts. */
export function refreshQueues(): void {
  void poll();
}

/** useLive keeps the poller running while the component is shown, and returns its state. */
export function useLive(): Live {
  useEffect(() => {
    users++;
    if (users === 1) void poll();
    return () => {
      users--;
      if (users === 0) clearTimeout(timer);
    };
  }, []);
  return useStore(live);
}
