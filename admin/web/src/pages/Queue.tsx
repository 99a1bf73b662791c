import { int } from "../lib/format";
import { useLive } from "../lib/live";
import { seg, withQuery } from "../lib/router";
import { STATES, countOf } from "../lib/states";
import { useTitle } from "../lib/title";
import { Link } from "../components/Link";
import { PauseButton, PausedBadge } from "../components/PauseButton";
import { Empty, ErrorBox, Loading } from "../components/Status";
import { QueueStats } from "../components/QueueStats";
import { Throughput } from "../components/Throughput";
import { UnservedWarning } from "../components/Unserved";
import { QueueConfigPanel } from "./QueueConfig";

/**
 * QueuePage shows one queue: live counts, throughput now and its history
 * (as the server keeps it), configuration, and a warning when some of its
 * ready tasks are of types no live worker takes.
 */
export function QueuePage({ name }: { name: string }) {
  useTitle(`Queue ${name}`);
  const lv = useLive();
  const q = lv.queues?.find((x) => x.name === name);
  return (
    <>
      <p class="crumbs">
        <Link to="/">Queues</Link> /
      </p>
      <div class="page-head">
        <h1>
          Queue <span class="mono">{name}</span>
        </h1>
        {q && <PausedBadge paused={q.paused} />}
        {q && <PauseButton queue={q} />}
      </div>
      {lv.error && <ErrorBox error={lv.error} what="The live numbers could not be refreshed" />}
      {!lv.queues ? (
        lv.error ? null : <Loading />
      ) : !q ? (
        <Empty>
          No queue named “{name}”. A queue exists once a task has been enqueued into it. <Link to="/">All queues</Link>
        </Empty>
      ) : (
        <>
          <UnservedWarning queue={q} />
          <section class="panel" aria-labelledby="counts-h">
            <h2 id="counts-h">Tasks</h2>
            <ul class="cards" data-queue={q.name}>
              {STATES.map((s) => (
                <li key={s.name} class={`card state-${s.name}`} data-state={s.name}>
                  <Link to={withQuery("/tasks", { queue: name, state: s.name })}>
                    <span class="card-n">{int(countOf(q, s.name))}</span>
                    <span class="card-label">{s.label}</span>
                  </Link>
                  <span class="card-help muted">{s.help}</span>
                </li>
              ))}
            </ul>
            <p class="muted">
              Since the queue was created: {int(q.enqueued)} enqueued, {int(q.processed)} attempts finished, {int(q.failed)} of
              them failed.{" "}
              <Link to={withQuery("/groups", { queue: name })}>Groups waiting in {name}</Link>
            </p>
          </section>
          <Throughput queue={name} rates={lv.rates.get(name)} rated={lv.rated} key={seg(name)} />
          <QueueStats queue={name} key={seg(name)} />
          <QueueConfigPanel queue={name} fromList={q.config} key={seg(name)} />
        </>
      )}
    </>
  );
}
