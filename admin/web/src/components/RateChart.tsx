import { useEffect, useRef } from "preact/hooks";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import { HISTORY, type Series } from "../lib/live";
import { rate } from "../lib/format";

// The line colours come from CSS (--enqueued, --completed, --failed), so
// they follow the light or dark scheme.
function color(el: Element, name: string): string {
  return getComputedStyle(el).getPropertyValue(name).trim() || "#888";
}

const dark = matchMedia("(prefers-color-scheme: dark)");
const clock = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit" });

function options(el: HTMLElement, width: number): uPlot.Options {
  const fg = color(el, "--muted");
  const grid = color(el, "--grid");
  const axis: uPlot.Axis = {
    stroke: fg,
    grid: { stroke: grid, width: 1 },
    ticks: { stroke: grid, width: 1 },
  };
  const line = (label: string, v: string): uPlot.Series => ({
    label,
    stroke: color(el, v),
    width: 2,
    points: { show: false },
    value: (_u, n) => (n == null ? "—" : rate(n)),
  });
  return {
    width,
    height: 200,
    series: [
      { label: "Time", value: (_u, t) => (t == null ? "—" : new Date(t * 1000).toLocaleTimeString()) },
      line("Enqueued", "--enqueued"),
      line("Completed", "--completed"),
      line("Failed", "--failed"),
    ],
    axes: [
      {
        ...axis,
        space: 70,
        incrs: [60, 120, 300, 600],
        values: (_u, vals) => vals.map((v) => clock.format(new Date(v * 1000))),
      },
      { ...axis, size: 56, values: (_u, vals) => vals.map((v) => rate(v)) },
    ],
    scales: {
      // A fixed window of the last HISTORY seconds, so the axis reads in
      // minutes from the first sample on.
      x: {
        time: true,
        range: (_u, _min, max) => {
          const hi = Number.isFinite(max) && max > 1e9 ? max : Date.now() / 1000;
          return [hi - HISTORY, hi];
        },
      },
      y: { range: (_u, _min, max) => [0, Math.max(1, max * 1.1)] },
    },
    cursor: { points: { show: false } },
    // The rates above the chart are its legend, in the same colours.
    legend: { show: false },
  };
}

/**
 * RateChart draws a throughput history: enqueued, completed and failed
 * tasks per second. The numbers beside it (see Rates) carry the same
 * information for screen readers, so the canvas itself is hidden from them.
 */
export function RateChart({ series, label }: { series: Series | undefined; label: string }) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const data = (): uPlot.AlignedData =>
    series ? [series.t, series.enqueued, series.completed, series.failed] : [[], [], [], []];

  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const make = () => {
      plot.current?.destroy();
      plot.current = new uPlot(options(el, el.clientWidth || 600), data(), el);
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
  }, []);

  useEffect(() => {
    plot.current?.setData(data());
  });

  return (
    <figure class="chart" data-samples={series?.t.length ?? 0}>
      <figcaption>{label}</figcaption>
      <div ref={box} aria-hidden="true" />
      {(!series || series.t.length < 2) && <p class="muted chart-wait">Measuring: the rates appear after a few seconds.</p>}
    </figure>
  );
}
