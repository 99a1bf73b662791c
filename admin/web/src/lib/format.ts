// Numbers, times and durations as the pages show them.
import type { Duration, Timestamp } from "@bufbuild/protobuf/wkt";
import { timestampDate } from "@bufbuild/protobuf/wkt";

const ints = new Intl.NumberFormat("en-US");
const oneDecimal = new Intl.NumberFormat("en-US", { maximumFractionDigits: 1 });

/** int formats a count with thousands separators. */
export function int(n: number | bigint): string {
  return ints.format(n);
}

/** rate formats a per-second rate. */
export function rate(n: number): string {
  return `${n >= 100 ? ints.format(Math.round(n)) : oneDecimal.format(n)}/s`;
}

/** bytes formats a size in bytes. */
export function bytes(n: number | bigint): string {
  const v = Number(n);
  if (v < 1024) return `${v} B`;
  const units = ["KiB", "MiB", "GiB", "TiB"];
  let x = v / 1024;
  let i = 0;
  while (x >= 1024 && i < units.length - 1) {
    x /= 1024;
    i++;
  }
  return `${oneDecimal.format(x)} ${units[i]}`;
}

/** dateOf converts a wire timestamp; undefined when unset. */
export function dateOf(ts: Timestamp | undefined): Date | undefined {
  if (!ts || (ts.seconds === 0n && ts.nanos === 0)) return undefined;
  return timestampDate(ts);
}

/**
 * relative says how far d is from now, in the largest unit that fits:
 * "just now", "12 s ago", "3 min ago", "in 2 h".
 */
export function relative(d: Date, now: number): string {
  const ms = d.getTime() - now;
  const abs = Math.abs(ms);
  if (abs < 1000) return "just now";
  let text: string;
  if (abs < 60_000) text = `${Math.floor(abs / 1000)} s`;
  else if (abs < 3_600_000) text = `${Math.floor(abs / 60_000)} min`;
  else if (abs < 86_400_000) text = `${Math.floor(abs / 3_600_000)} h`;
  else text = `${Math.floor(abs / 86_400_000)} d`;
  return ms < 0 ? `${text} ago` : `in ${text}`;
}

/** exact is d in full, local time and UTC, for a tooltip. */
export function exact(d: Date): string {
  const local = d.toLocaleString(undefined, {
    year: "numeric",
    month: "short",
    day: "numeric",
    hour: "2-digit",
    minute: "2-digit",
    second: "2-digit",
    timeZoneName: "short",
  });
  return `${local} (${d.toISOString()})`;
}

/** durationMs is a wire duration in ms; 0 when unset. */
export function durationMs(d: Duration | undefined): number {
  if (!d) return 0;
  return Number(d.seconds) * 1000 + Math.round(d.nanos / 1e6);
}

/** duration formats ms the way Go prints a time.Duration ("1m30s", "250ms"). */
export function duration(ms: number): string {
  if (ms === 0) return "0s";
  const sign = ms < 0 ? "-" : "";
  let v = Math.abs(ms);
  if (v < 1000) return `${sign}${v}ms`;
  const h = Math.floor(v / 3_600_000);
  v -= h * 3_600_000;
  const m = Math.floor(v / 60_000);
  v -= m * 60_000;
  const s = v / 1000;
  let out = sign;
  if (h) out += `${h}h`;
  if (h || m) out += `${m}m`;
  out += `${Number.isInteger(s) ? s : s.toFixed(3).replace(/0+$/, "")}s`;
  return out;
}

const unitMs: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/**
 * parseDuration reads a Go-style duration ("30s", "1m30s", "1.5h", "250ms")
 * into ms; a bare number is seconds. It returns undefined when s is not one.
 */
export function parseDuration(s: string): number | undefined {
  const t = s.trim();
  if (t === "") return 0;
  if (/^\d+(\.\d+)?$/.test(t)) return Math.round(Number(t) * 1000);
  const re = /(\d+(?:\.\d+)?)(ms|h|m|s)/gy;
  let total = 0;
  let end = 0;
  for (const m of t.matchAll(re)) {
    total += Number(m[1]) * (unitMs[m[2] ?? "s"] ?? 1000);
    end = (m.index ?? 0) + m[0].length;
  }
  return end === t.length && end > 0 ? Math.round(total) : undefined;
}
