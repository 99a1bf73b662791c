import type { Durations, GetQueueStatsResponse } from "../gen/conveyor/v1/admin_pb";
import { admin } from "../lib/api";
import { duration, durationMs, int } from "../lib/format";
import { usePoll } from "../lib/poll";
import { ErrorBox } from "./Status";
import { Time } from "./Time";

/** quantiles shows a Durations' p50 and p95, or dashes when none was seen. */
function quantiles(d: Durations | undefined) {
  const n = d ? Number(d.count) : 0;
  return (
    <>
      <td class="num">{int(n)}</td>
      <td class="num">{n ? duration(durationMs(d?.p50)) : "—"}</td>
      <td class="num">{n ? duration(durationMs(d?.p95)) : "—"}</td>
    </>
  );
}

/**
 * QueueStats shows how far behind a queue is (the wait of its oldest
 * ready task, from the engine) and how long its tasks waited and ran, by
 * type (p50, p95, from the answering server's metrics since it started),
 * read every 5 s.
 */
export function QueueStats({ queue }: { queue: string }) {
  const st = usePoll<GetQueueStatsResponse>((signal) => admin.getQueueStats({ queue }, { signal }), 5000, [queue]);
  const s = st.data;
  return (
    <section class="panel" aria-labelledby="stats-h" data-latency-ms={s ? durationMs(s.latency) : undefined}>
      <h2 id="stats-h">Latency and durations</h2>
      {st.error && <ErrorBox error={st.error} what="The queue's latency could not be read" />}
      {s && (
        <>
          <p class="latency">
            Latency:{" "}
            {s.oldestReadyAt ? (
              <>
                <strong>{duration(durationMs(s.latency))}</strong> (the oldest ready task became ready{" "}
                <Time ts={s.oldestReadyAt} />)
              </>
            ) : (
              <strong>nothing waiting</strong>
            )}
          </p>
          {Number(s.wait?.count ?? 0) === 0 && s.types.length === 0 ? (
            <p class="muted">No task of this queue has run since this server started.</p>
          ) : (
            <table class="stats">
              <thead>
                <tr>
                  <th scope="col">What</th>
                  <th scope="col" class="num">Count</th>
                  <th scope="col" class="num">p50</th>
                  <th scope="col" class="num">p95</th>
                </tr>
              </thead>
              <tbody>
                <tr data-stat="wait">
                  <th scope="row">wait (every type)</th>
                  {quantiles(s.wait)}
                </tr>
                {s.types.map((t) => (
                  <tr key={t.type} data-stat="run" data-type={t.type}>
                    <th scope="row">
                      run <span class="mono">{t.type}</span>
                    </th>
                    {quantiles(t.run)}
                  </tr>
                ))}
              </tbody>
            </table>
          )}
          <p class="muted">
            Durations observed by this server since <Time ts={s.observedSince} />.
          </p>
        </>
      )}
    </section>
  );
}
