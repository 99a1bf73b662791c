import type { Rates as R } from "../lib/live";
import { rate } from "../lib/format";

/** Rates shows the three throughput figures as text, with the chart's colours. */
export function Rates({ rates, waiting }: { rates: R | undefined; waiting: boolean }) {
  const v = (n: number | undefined) => (waiting || n === undefined ? "—" : rate(n));
  return (
    <dl class="rates">
      <div class="rate-enqueued">
        <dt>Enqueued</dt>
        <dd>{v(rates?.enqueued)}</dd>
      </div>
      <div class="rate-completed">
        <dt>Completed</dt>
        <dd>{v(rates?.completed)}</dd>
      </div>
      <div class="rate-failed">
        <dt>Failed</dt>
        <dd>{v(rates?.failed)}</dd>
      </div>
    </dl>
  );
}
