import { useEffect, useRef } from "preact/hooks";
import type { Rates as R } from "../lib/live";
import { chosenRange, unitOf, useHistory } from "../lib/history";
import { useStore } from "../lib/store";
import { RangePicker } from "./RangePicker";
import { RateChart } from "./RateChart";
import { Rates } from "./Rates";
import { ErrorBox } from "./Status";

/**
 * Throughput is a page's throughput panel: the rates now, measured by the
 * page's live poll, and the chart of the history the server keeps for
 * queue ("" for every queue), over the range chosen above it. The history
 * is read once a minute, and again when queues changes (the number of
 * queues: the first one made shows at once, not a minute later).
 */
export function Throughput({ queue, queues, rates, rated }: { queue: string; queues?: number | undefined; rates: R | undefined; rated: boolean }) {
  const range = useStore(chosenRange);
  const history = useHistory(queue, range);
  const seen = useRef(queues);
  useEffect(() => {
    if (seen.current !== undefined && seen.current !== queues) history.reload();
    seen.current = queues;
  }, [queues]);
  const who = queue === "" ? "All queues" : queue;
  return (
    <section aria-labelledby="throughput-h" class="panel throughput">
      <div class="panel-head">
        <h2 id="throughput-h">Throughput</h2>
        <RangePicker value={range} onChange={(r) => chosenRange.set(r)} />
      </div>
      <Rates rates={rates} waiting={!rated} />
      {history.error && <ErrorBox error={history.error} retry={history.reload} what="The history could not be read" />}
      <RateChart
        history={history.data}
        failed={history.error !== undefined}
        range={range}
        label={`${who}, tasks per ${unitOf(range.resolution)}, last ${range.span}`}
      />
    </section>
  );
}
