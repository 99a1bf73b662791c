import { useEffect, useState } from "preact/hooks";
import { FAILED, PER_QUEUE, loadAcross, statesOf, type Slice } from "../lib/across";
import { int } from "../lib/format";
import { useLive } from "../lib/live";
import { usePoll } from "../lib/poll";
import { useLocation, withQuery } from "../lib/router";
import { STATES, countOf, type StateName } from "../lib/states";
import { useTitle } from "../lib/title";
import { Link } from "../components/Link";
import { Empty, ErrorBox, Loading } from "../components/Status";
import { SelectionBar } from "./SelectionBar";
import { TaskTable } from "./TaskTable";
import { urlOf } from "./Tasks";

/** acrossURL is the URL of the view of a state ("failed" or a state's name). */
export function acrossURL(state: string): string {
  return withQuery("/across", { state: state === FAILED ? undefined : state });
}

/**
 * AcrossPage lists the tasks of one state in every queue (by default the
 * failed ones: retrying or archived), the first PER_QUEUE of each queue,
 * merged by id, with a link per queue to the rest. A selection can be run,
 * canceled, archived or deleted as in the task browser.
 */
export function AcrossPage() {
  const loc = useLocation();
  const name = loc.query.get("state") || FAILED;
  const states = statesOf(name) ?? statesOf(FAILED) ?? [];
  const view = statesOf(name) ? name : FAILED;
  const what = view === FAILED ? "failed (retrying or archived)" : (states[0]?.label.toLowerCase() ?? "");
  useTitle(`Tasks across queues: ${what}`);
  const lv = useLive();
  const list = usePoll((signal) => loadAcross(states, signal), null, [view]);
  const [selected, setSelected] = useState<Set<string>>(new Set());
  useEffect(() => setSelected(new Set()), [view]);
  const tasks = list.data?.tasks ?? [];
  // The tabs' counts are the live ones, as the task browser's tabs.
  const countIn = (names: StateName[]) => (lv.queues ?? []).reduce((n, q) => n + names.reduce((m, s) => m + countOf(q, s), 0), 0);
  const tabs: { name: string; label: string; help: string; n: number }[] = [{ name: FAILED, label: "Failed", help: "retrying or archived", n: countIn(["retry", "archived"]) }].concat(
    STATES.map((s) => ({ name: s.name, label: s.label, help: s.help, n: countIn([s.name]) })),
  );
  return (
    <>
      <div class="page-head">
        <h1>Tasks across queues</h1>
        <span class="muted">{what}</span>
        <button type="button" onClick={list.reload} disabled={list.loading}>
          Refresh
        </button>
      </div>
      <nav class="tabs" aria-label="Task state">
        <ul>
          {tabs.map((t) => (
            <li key={t.name}>
              <Link to={acrossURL(t.name)} aria-current={view === t.name ? "page" : undefined} data-state={t.name} title={t.help}>
                {t.label} <span class="tab-n">{lv.queues ? int(t.n) : ""}</span>
              </Link>
            </li>
          ))}
        </ul>
      </nav>
      <section class="panel" aria-label="Tasks">
        <p class="muted">
          The first {PER_QUEUE} tasks of each queue, merged in the order they were enqueued in; a queue that holds more links
          to the rest below.
        </p>
        <SelectionBar tasks={tasks} selected={selected} onClear={() => setSelected(new Set())} onDone={list.reload} />
        {list.error && <ErrorBox error={list.error} what="Could not list the tasks" retry={list.reload} />}
        {!list.data ? (
          list.error ? null : <Loading what="Listing the queues' tasks" />
        ) : tasks.length === 0 ? (
          <Empty>
            No {what} task in {list.data.queues === 1 ? "the one queue" : `any of the ${int(list.data.queues)} queues`}.
          </Empty>
        ) : (
          <>
            <TaskTable tasks={tasks} selected={selected} onSelect={setSelected} withQueue />
            <More slices={list.data.slices} />
          </>
        )}
      </section>
    </>
  );
}

/** More links each queue that holds more tasks than the view shows to its task browser. */
function More({ slices }: { slices: Slice[] }) {
  const cut = slices.filter((s) => s.more);
  if (cut.length === 0) return null;
  return (
    <div class="more-queues">
      <h2>More in these queues</h2>
      <ul class="links">
        {cut.map((s) => (
          <li key={`${s.queue}/${s.state.name}`} data-queue={s.queue} data-state={s.state.name}>
            <Link to={urlOf({ queue: s.queue, state: s.state.name })}>
              {s.queue}: all {int(s.total)} {s.state.label.toLowerCase()}
            </Link>{" "}
            <span class="muted">({int(s.shown)} shown here)</span>
          </li>
        ))}
      </ul>
    </div>
  );
}
