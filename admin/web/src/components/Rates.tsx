import type { Rates as R } from "../lib/live";
import { rate } from "../lib/format";

/**
 * Rates shows the three throughput figures now, per second, as text with
 * the chart's colours.
 */
export function Rates({ rates, waiting }: { rates: R | undefined; waiting: boolean }) {
  const v = (n: number | undefined) => (waiting || n === undefined ? "—" : rate(n));
  return (
    <div class="rates-row">
      <span class="rates-now muted" aria-hidden="true">
        Now, per second
      </span>
      <dl class="rates" aria-label="Throughput now, per second">
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
    </div>
  );
}
