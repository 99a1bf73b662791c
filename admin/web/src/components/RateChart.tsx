import { useEffect, useRef, useState } from "preact/hooks";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import { HistoryResolution } from "../gen/conveyor/v1/admin_pb";
import { type History, type Range, type Window, totalsOf, widthOf, windowOf } from "../lib/history";
import { int } from "../lib/format";

// The line colours come from CSS (--enqueued, --completed, --failed), so
// they follow the light or dark scheme.
function color(el: Element, name: string): string {
  return getComputedStyle(el).getPropertyValue(name).trim() || "#888";
}

const dark = matchMedia("(prefers-color-scheme: dark)");

// A minute reads as a local clock time; a day as a date of the UTC day the
// server counts it in (its buckets start at 00:00 UTC).
const clock = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit" });
const localDay = new Intl.DateTimeFormat(undefined, { month: "short", day: "numeric" });
const utcDay = new Intl.DateTimeFormat(undefined, { month: "short", day: "numeric", timeZone: "UTC" });
const fullMinute = new Intl.DateTimeFormat(undefined, {
  weekday: "short",
  year: "numeric",
  month: "short",
  day: "numeric",
  hour: "2-digit",
  minute: "2-digit",
  timeZoneName: "short",
});
const fullDay = new Intl.DateTimeFormat(undefined, { weekday: "short", year: "numeric", month: "short", day: "numeric", timeZone: "UTC" });
const compact = new Intl.NumberFormat("en-US", { notation: "compact", maximumFractionDigits: 1 });

/** tickLabel is an axis label: a clock time, a date at local midnight, or a UTC date. */
function tickLabel(res: HistoryResolution, t: number): string {
  const d = new Date(t * 1000);
  if (res === HistoryResolution.DAY) return utcDay.format(d);
  return d.getHours() === 0 && d.getMinutes() === 0 ? localDay.format(d) : clock.format(d);
}

/** bucketLabel is a bucket's time in full, for the tooltip. */
function bucketLabel(res: HistoryResolution, t: number, current: boolean): string {
  const d = new Date(t * 1000);
  if (res === HistoryResolution.DAY) return `${fullDay.format(d)} (UTC day${current ? ", so far" : ""})`;
  return `${fullMinute.format(d)}${current ? " (so far)" : ""}`;
}

// The axis steps, in seconds for time and in tasks for counts: whole
// minutes, hours and days, and whole numbers of tasks.
const MINUTE_STEPS = [60, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400];
const DAY_STEPS = [86400, 2 * 86400, 7 * 86400, 14 * 86400, 28 * 86400];
const COUNT_STEPS = [1, 2, 5].flatMap((m) => [1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9].map((e) => m * e)).sort((a, b) => a - b);

/** Tip is the bucket the pointer is over, and where to show it. */
interface Tip {
  i: number;
  left: number;
  top: number;
  flip: boolean;
}

function options(el: HTMLElement, width: number, range: Range, win: () => Window, onTip: (t: Tip | null) => void): uPlot.Options {
  const res = range.resolution;
  const fg = color(el, "--muted");
  const grid = color(el, "--grid");
  const axis: uPlot.Axis = {
    stroke: fg,
    grid: { stroke: grid, width: 1 },
    ticks: { stroke: grid, width: 1 },
  };
  const line = (label: string, v: string): uPlot.Series => {
    const stroke = color(el, v);
    return {
      label,
      stroke,
      width: 2,
      // Dots where the buckets are far enough apart to tell them apart, and
      // for a lone bucket, which draws no line.
      points: {
        size: 5,
        fill: stroke,
        show: (u) => u.data[0].length < 2 || u.bbox.width / devicePixelRatio / range.points >= 12,
      },
    };
  };
  const half = widthOf(res) / 2;
  const utc = (t: number) => uPlot.tzDate(new Date(t * 1000), "Etc/UTC");
  return {
    width,
    height: 200,
    ...(res === HistoryResolution.DAY ? { tzDate: utc } : {}),
    series: [{ label: "Time" }, line("Enqueued", "--enqueued"), line("Completed", "--completed"), line("Failed", "--failed")],
    axes: [
      {
        ...axis,
        space: 70,
        incrs: res === HistoryResolution.DAY ? DAY_STEPS : MINUTE_STEPS,
        values: (_u, vals) => vals.map((v) => tickLabel(res, v)),
      },
      {
        ...axis,
        size: 56,
        incrs: COUNT_STEPS,
        values: (_u, vals) => vals.map((v) => (v >= 10_000 ? compact.format(v) : int(v))),
      },
    ],
    scales: {
      // The whole range, whatever part of it has history, so the axis
      // reads the same from the first bucket on; half a bucket more each
      // side, so that the newest point is not cut by the edge.
      x: { time: true, range: () => [win().from - half, win().to + half] },
      y: { range: (_u, _min, max) => [0, Math.max(1, Math.ceil(max * 1.1))] },
    },
    cursor: { points: { show: false }, y: false, drag: { x: false, y: false, setScale: false } },
    // The totals under the chart are its legend, in the same colours; the
    // tooltip shows a bucket's figures.
    legend: { show: false },
    hooks: {
      setCursor: [
        (u) => {
          const i = u.cursor.idx;
          const x = i == null ? undefined : u.data[0][i];
          if (i == null || x == null || u.cursor.left == null || u.cursor.left < 0) {
            onTip(null);
            return;
          }
          const plot = el.getBoundingClientRect();
          const over = u.over.getBoundingClientRect();
          const px = u.valToPos(x, "x");
          onTip({ i, left: over.left - plot.left + px, top: over.top - plot.top + 8, flip: px > over.width / 2 });
        },
      ],
    },
  };
}

/** Note is what the chart says instead of lines, if anything. */
type Note = "loading" | "failed" | "empty" | "quiet" | "";

function noteOf(history: History | undefined, failed: boolean, win: Window): Note {
  if (!history) return failed ? "failed" : "loading";
  const any = (h: History) => h.enqueued.some((n) => n > 0) || h.completed.some((n) => n > 0) || h.failed.some((n) => n > 0);
  if (!any(history)) return "empty";
  return any(win.history) ? "" : "quiet";
}

/**
 * RateChart draws a queue's history, or every queue's, as the server keeps
 * it: enqueued, completed and failed tasks per minute or per day over the
 * chosen range. Hovering shows a bucket's time and counts. The totals
 * under it carry the same information for screen readers (and the
 * figure's data attributes for tests), so the canvas itself is hidden from
 * them. failed says the latest read failed (the caller shows the error):
 * no "Loading" then.
 */
export function RateChart({ history, failed, range, label }: { history: History | undefined; failed: boolean; range: Range; label: string }) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const [tip, setTip] = useState<Tip | null>(null);
  // The cursor moves often, and a move within one bucket changes nothing.
  const showTip = (t: Tip | null) =>
    setTip((was) => (was && t && was.i === t.i && was.left === t.left && was.top === t.top) || (!was && !t) ? was : t);
  const empty: History = { resolution: range.resolution, t: [], enqueued: [], completed: [], failed: [] };
  // The history of another resolution is the previous range's, on its way out.
  const h = history && history.resolution === range.resolution ? history : undefined;
  const win = windowOf(h ?? empty, range);
  const current = useRef(win);
  current.current = win;
  const data = (): uPlot.AlignedData => {
    const w = current.current.history;
    return [w.t, w.enqueued, w.completed, w.failed];
  };

  useEffect(() => {
    const el = box.current;
    const wrap = el?.parentElement;
    if (!el || !wrap) return;
    const make = () => {
      plot.current?.destroy();
      setTip(null);
      plot.current = new uPlot(options(wrap, el.clientWidth || 600, range, () => current.current, showTip), data(), el);
    };
    make();
    const resize = new ResizeObserver(() => {
      const w = el.clientWidth;
      if (plot.current && w > 0 && Math.abs(plot.current.width - w) > 1) plot.current.setSize({ width: w, height: 200 });
    });
    resize.observe(el);
    dark.addEventListener("change", make);
    return () => {
      resize.disconnect();
      dark.removeEventListener("change", make);
      plot.current?.destroy();
      plot.current = null;
    };
  }, [range.key]);

  // Only a new answer redraws: setData moves the cursor, whose tooltip
  // renders again, which must not set the data again.
  useEffect(() => {
    plot.current?.setData(data());
  }, [h, range.key]);

  const note = noteOf(h, failed, win);
  const totals = totalsOf(win.history);
  const w = win.history;
  const last = h ? h.t[h.t.length - 1] : undefined;
  const tipAt = tip && tip.i < w.t.length ? tip : null;
  return (
    <figure
      class="chart"
      data-range={range.key}
      data-state={note || "drawn"}
      data-points={w.t.length}
      data-enqueued={totals.enqueued}
      data-completed={totals.completed}
      data-failed={totals.failed}
    >
      <figcaption>{label}</figcaption>
      <div class="chart-plot">
        <div ref={box} aria-hidden="true" />
        {tipAt && (
          <div class={`chart-tip${tipAt.flip ? " flip" : ""}`} style={{ left: `${tipAt.left}px`, top: `${tipAt.top}px` }} aria-hidden="true">
            <div class="chart-tip-time">{bucketLabel(range.resolution, w.t[tipAt.i]!, w.t[tipAt.i] === last)}</div>
            <div class="t-enqueued">{int(w.enqueued[tipAt.i] ?? 0)} enqueued</div>
            <div class="t-completed">{int(w.completed[tipAt.i] ?? 0)} completed</div>
            <div class="t-failed">{int(w.failed[tipAt.i] ?? 0)} failed</div>
          </div>
        )}
        {note && note !== "failed" && (
          <p class="muted chart-note" role="status">
            {note === "loading"
              ? "Loading the history…"
              : note === "empty"
                ? "No history yet: history starts with the first task."
                : `Nothing enqueued or worked in the last ${range.span}.`}
          </p>
        )}
      </div>
      {h && note !== "empty" && (
        <p class="chart-totals">
          <span>In the last {range.span}:</span> <span class="t-enqueued">{int(totals.enqueued)} enqueued</span>{" "}
          <span class="t-completed">{int(totals.completed)} completed</span> <span class="t-failed">{int(totals.failed)} failed</span>
          {h.resolution === HistoryResolution.DAY && <span class="muted"> (UTC days)</span>}
        </p>
      )}
    </figure>
  );
}

