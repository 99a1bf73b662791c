// A queue's history as the server keeps it (GetQueueHistory): what every
// queue, or one, did per minute over the last day and per UTC day over 90
// days. The server samples its counters every minute and keeps the samples
// across restarts, so a chart drawn from them shows on a first view and
// after a reload, unlike rates measured by the open tab.
import { HistoryResolution, type GetQueueHistoryResponse } from "../gen/conveyor/v1/admin_pb";
import { admin } from "./api";
import { usePoll, type Loaded } from "./poll";
import { store } from "./store";

/** Range is a span of history a chart can show. */
export interface Range {
  /** key names the range ("1h"), for tests and the buttons' data. */
  key: string;
  /** label is the button's text ("1 h"). */
  label: string;
  /** span says the range in words, after "last" ("hour", "6 hours"). */
  span: string;
  resolution: HistoryResolution;
  /** points is how many buckets the range holds. */
  points: number;
}

/** RANGES are the ranges a chart offers: minutes up to a day, then days. */
export const RANGES: readonly Range[] = [
  { key: "1h", label: "1 h", span: "hour", resolution: HistoryResolution.MINUTE, points: 60 },
  { key: "6h", label: "6 h", span: "6 hours", resolution: HistoryResolution.MINUTE, points: 360 },
  { key: "24h", label: "24 h", span: "24 hours", resolution: HistoryResolution.MINUTE, points: 1440 },
  { key: "7d", label: "7 d", span: "7 days", resolution: HistoryResolution.DAY, points: 7 },
  { key: "30d", label: "30 d", span: "30 days", resolution: HistoryResolution.DAY, points: 30 },
  { key: "90d", label: "90 d", span: "90 days", resolution: HistoryResolution.DAY, points: 90 },
];

/**
 * chosenRange is the range the charts show, kept while the tab lives (not
 * in storage: the dashboard writes nothing to localStorage), so moving
 * between the overview and a queue keeps it.
 */
export const chosenRange = store<Range>(RANGES[0]!);

/** widthOf is the length of one bucket of res, in seconds. */
export function widthOf(res: HistoryResolution): number {
  return res === HistoryResolution.DAY ? 86_400 : 60;
}

/** unitOf names what one bucket of res counts: "minute" or "day". */
export function unitOf(res: HistoryResolution): string {
  return res === HistoryResolution.DAY ? "day" : "minute";
}

/**
 * History is a history for a chart: the start of each bucket in seconds
 * since the epoch, oldest first with no gap, and one count array per line.
 * The last bucket is the current one, still filling.
 */
export interface History {
  resolution: HistoryResolution;
  t: number[];
  enqueued: number[];
  completed: number[];
  failed: number[];
}

/** historyOf turns the server's answer into a History. */
export function historyOf(res: HistoryResolution, msg: GetQueueHistoryResponse): History {
  const h: History = { resolution: res, t: [], enqueued: [], completed: [], failed: [] };
  for (const p of msg.points) {
    h.t.push(Number(p.start?.seconds ?? 0n));
    h.enqueued.push(Number(p.enqueued));
    h.completed.push(Number(p.completed));
    h.failed.push(Number(p.failed));
  }
  return h;
}

/** Window is the part of a history a range shows. */
export interface Window {
  /** from and to are the first and last buckets' starts, in seconds. */
  from: number;
  to: number;
  history: History;
}

/**
 * windowOf keeps the range's buckets of h: those up to its last one (the
 * server's current bucket; the browser's clock when h is empty).
 */
export function windowOf(h: History, r: Range): Window {
  const width = widthOf(r.resolution);
  const last = h.t[h.t.length - 1];
  const to = last ?? Math.floor(Date.now() / 1000 / width) * width;
  const from = to - (r.points - 1) * width;
  let i = 0;
  while (i < h.t.length && h.t[i]! < from) i++;
  return {
    from,
    to,
    history: {
      resolution: h.resolution,
      t: h.t.slice(i),
      enqueued: h.enqueued.slice(i),
      completed: h.completed.slice(i),
      failed: h.failed.slice(i),
    },
  };
}

/** Totals are a history's counts added up. */
export interface Totals {
  enqueued: number;
  completed: number;
  failed: number;
}

/** totalsOf adds up h's counts. */
export function totalsOf(h: History): Totals {
  const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
  return { enqueued: sum(h.enqueued), completed: sum(h.completed), failed: sum(h.failed) };
}

// nextMinute is the wait until just after the minute turns, when the
// server's newest bucket is a new one: the history is read once a minute.
const nextMinute = () => 60_000 - (Date.now() % 60_000) + 2_000;

/**
 * useHistory reads the history of queue ("" for every queue summed) at
 * the range's resolution, now and once a minute while the page shows.
 */
export function useHistory(queue: string, r: Range): Loaded<History> {
  const res = r.resolution;
  return usePoll(
    async (signal) => historyOf(res, await admin.getQueueHistory({ queue, resolution: res }, { signal })),
    nextMinute,
    [queue, res],
  );
}
