import type { Timestamp } from "@bufbuild/protobuf/wkt";
import { dateOf, exact, relative } from "../lib/format";
import { useNow } from "../lib/poll";

/**
 * Time shows a timestamp relative to now ("3 min ago", "in 12 s"), kept
 * current, with the exact time on hover and for assistive technology.
 */
export function Time({ ts, empty = "—" }: { ts: Timestamp | undefined; empty?: string }) {
  const now = useNow();
  const d = dateOf(ts);
  if (!d) return <span class="muted">{empty}</span>;
  const full = exact(d);
  return (
    <time dateTime={d.toISOString()} title={full} aria-label={`${relative(d, now)}, ${full}`}>
      {relative(d, now)}
    </time>
  );
}
