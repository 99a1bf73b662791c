import { useEffect } from "preact/hooks";
import type { QueueInfo } from "../gen/conveyor/v1/admin_pb";
import { ENQUEUE_EXAMPLE } from "../lib/cli";
import { int } from "../lib/format";
import { useLive } from "../lib/live";
import { seg, withQuery } from "../lib/router";
import { STATES, countOf, totalOf } from "../lib/states";
import { useTitle } from "../lib/title";
import { Link } from "../components/Link";
import { DeleteQueueButton } from "../components/DeleteQueueButton";
import { PauseButton, PausedBadge } from "../components/PauseButton";
import { Empty, ErrorBox, Loading } from "../components/Status";
import { Throughput } from "../components/Throughput";
import { UnservedBadge } from "../components/Unserved";

/**
 * Overview lists the queues with their live counts per state (and a mark
 * on a queue whose ready tasks include types no live worker takes) and
 * charts the history of all of them, as the server keeps it.
 */
export function Overview() {
  useTitle("Queues");
  const lv = useLive();
  const queues = lv.queues;
  useEffect(() => {
    // Marks when the counts first show, for the first-paint check of the
    // browser test (performance.getEntriesByName("conveyor-overview")).
    if (queues && performance.getEntriesByName("conveyor-overview").length === 0) {
      performance.mark("conveyor-overview");
    }
  }, [queues !== undefined]);
  return (
    <>
      <div class="page-head">
        <h1>Queues</h1>
      </div>
      {lv.error && <ErrorBox error={lv.error} what="The live numbers could not be refreshed" />}
      <Throughput queue="" queues={queues?.length} rates={lv.total} rated={lv.rated} />
      <section aria-labelledby="queues-h" class="panel">
        <h2 id="queues-h">Queues</h2>
        {!queues ? (
          lv.error ? null : <Loading what="Loading the queues" />
        ) : queues.length === 0 ? (
          <Empty cmd={ENQUEUE_EXAMPLE}>No queues yet. A queue appears when its first task is enqueued. Enqueue a task:</Empty>
        ) : (
          <QueueTable queues={queues} rates={lv.rates} />
        )}
      </section>
    </>
  );
}

function QueueTable({ queues, rates }: { queues: QueueInfo[]; rates: Map<string, { enqueued: number; completed: number; failed: number }> }) {
  return (
    <div class="table-wrap">
      <table class="queues responsive">
        <caption class="sr-only">Tasks per state in each queue; each count links to those tasks.</caption>
        <thead>
          <tr>
            <th scope="col">Queue</th>
            <th scope="col">Status</th>
            {STATES.map((s) => (
              <th scope="col" class="num" key={s.name} title={s.help}>
                {s.label}
              </th>
            ))}
            <th scope="col" class="num">
              Total
            </th>
            <th scope="col" class="num" title="Completed per second">
              Done/s
            </th>
            <th scope="col" class="num" title="Failed attempts per second">
              Failed/s
            </th>
            <th scope="col">
              <span class="sr-only">Actions</span>
            </th>
          </tr>
        </thead>
        <tbody>
          {queues.map((q) => {
            const r = rates.get(q.name);
            return (
              <tr key={q.name} data-queue={q.name}>
                <th scope="row" data-label="Queue">
                  <Link to={`/queues/${seg(q.name)}`}>{q.name}</Link>
                </th>
                <td data-label="Status">
                  <span class="badges">
                    <PausedBadge paused={q.paused} />
                    <UnservedBadge queue={q} />
                  </span>
                </td>
                {STATES.map((s) => {
                  const n = countOf(q, s.name);
                  return (
                    <td class={`num${n === 0 ? " zero" : ""}`} data-label={s.label} data-state={s.name} key={s.name}>
                      <Link to={withQuery("/tasks", { queue: q.name, state: s.name })} aria-label={`${int(n)} ${s.label.toLowerCase()} in ${q.name}`}>
                        {int(n)}
                      </Link>
                    </td>
                  );
                })}
                <td class="num" data-label="Total">
                  {int(totalOf(q))}
                </td>
                <td class="num" data-label="Done/s">
                  {r ? r.completed.toFixed(1) : "—"}
                </td>
                <td class="num" data-label="Failed/s">
                  {r ? r.failed.toFixed(1) : "—"}
                </td>
                <td class="actions">
                  <PauseButton queue={q} />
                  {totalOf(q) === 0 && <DeleteQueueButton queue={q} />}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </div>
  );
}
