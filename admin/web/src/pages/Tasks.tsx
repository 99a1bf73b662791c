import { useEffect, useState } from "preact/hooks";
import type { ListTasksResponse } from "../gen/conveyor/v1/admin_pb";
import { TaskState } from "../gen/conveyor/v1/task_pb";
import { admin } from "../lib/api";
import { ENQUEUE_EXAMPLE } from "../lib/cli";
import { int } from "../lib/format";
import { useLive } from "../lib/live";
import { usePoll } from "../lib/poll";
import { navigate, useLocation, withQuery } from "../lib/router";
import { STATES, countOf, stateByName, totalOf } from "../lib/states";
import { useTitle } from "../lib/title";
import { Link } from "../components/Link";
import { Empty, ErrorBox, Loading } from "../components/Status";
import { BulkPanel } from "./BulkPanel";
import { SelectionBar } from "./SelectionBar";
import { TaskTable } from "./TaskTable";

/** PAGE_SIZES are the page sizes offered. */
const PAGE_SIZES = [20, 50, 100, 500];
const DEFAULT_SIZE = 50;

/** Filter is the task browser's selection, as its URL holds it. */
export interface Filter {
  queue: string;
  state: string; // a StateName, or "" for every state
  type: string;
  search: string;
  group: string; // an aggregation group, exact; "" for every task
  size: number;
  after: string; // the page token; "" for the first page
}

function filterOf(q: URLSearchParams): Filter {
  const size = Number(q.get("size"));
  return {
    queue: q.get("queue") ?? "",
    state: stateByName(q.get("state")) ? (q.get("state") ?? "") : "",
    type: q.get("type") ?? "",
    search: q.get("search") ?? "",
    group: q.get("group") ?? "",
    size: PAGE_SIZES.includes(size) ? size : DEFAULT_SIZE,
    after: q.get("after") ?? "",
  };
}

/** urlOf is the shareable URL of a filter. */
export function urlOf(f: Partial<Filter>): string {
  return withQuery("/tasks", {
    queue: f.queue,
    state: f.state,
    type: f.type,
    search: f.search,
    group: f.group,
    size: f.size && f.size !== DEFAULT_SIZE ? String(f.size) : undefined,
    after: f.after,
  });
}

// The pages seen so far, by filter and token, so that Previous and the
// page number work with the back button too.
const pageTrail = new Map<string, { prev: string; n: number }>();
const trailKey = (f: Filter, token: string) => `${f.queue}|${f.state}|${f.type}|${f.search}|${f.group}|${f.size}|${token}`;

// The list last shown for each queue, filters and page kept, so that a
// task opened from it leads back to it (its crumb, after a delete).
const lastList = new Map<string, string>();

/** listOf is the task list of queue to go back to: the one last shown, else its first page. */
export function listOf(queue: string): string {
  return lastList.get(queue) ?? urlOf({ queue });
}

/**
 * TasksPage is the task browser: a queue's tasks by state, filtered by
 * type and a search, a page at a time, with actions on a selection or on
 * every task of the state.
 */
export function TasksPage() {
  const loc = useLocation();
  const f = filterOf(loc.query);
  const lv = useLive();
  const queues = lv.queues;
  useTitle(f.queue ? `Tasks in ${f.queue}` : "Tasks");

  // With no queue chosen, show the first one.
  useEffect(() => {
    if (!f.queue && queues && queues[0]) navigate(urlOf({ ...f, queue: queues[0].name }), true);
  }, [f.queue, queues?.[0]?.name]);

  const key = urlOf(f);
  useEffect(() => {
    if (f.queue) lastList.set(f.queue, key);
  }, [key]);
  const page = usePoll<ListTasksResponse | undefined>(
    (signal) =>
      f.queue
        ? admin.listTasks(
            {
              queue: f.queue,
              state: stateByName(f.state)?.state ?? TaskState.UNSPECIFIED,
              type: f.type,
              search: f.search,
              group: f.group,
              pageSize: f.size,
              pageToken: f.after,
            },
            { signal },
          )
        : Promise.resolve(undefined),
    null,
    [key],
  );
  const [selected, setSelected] = useState<Set<string>>(new Set());
  useEffect(() => setSelected(new Set()), [key]);

  const q = queues?.find((x) => x.name === f.queue);
  const state = stateByName(f.state);
  const trail = pageTrail.get(trailKey(f, f.after)) ?? { prev: "", n: f.after ? 0 : 1 };
  const next = page.data?.nextPageToken ?? "";
  const goNext = () => {
    pageTrail.set(trailKey(f, next), { prev: f.after, n: trail.n ? trail.n + 1 : 0 });
    navigate(urlOf({ ...f, after: next }));
  };
  const tasks = page.data?.tasks ?? [];

  return (
    <>
      <div class="page-head">
        <h1>Tasks</h1>
        {f.queue && (
          <span class="muted">
            in <Link to={`/queues/${encodeURIComponent(f.queue)}`}>{f.queue}</Link>
          </span>
        )}
      </div>
      <FilterForm f={f} queueNames={queues?.map((x) => x.name) ?? []} />
      {f.queue && (
        <nav class="tabs" aria-label="Task state">
          <ul>
            <li>
              <Link to={urlOf({ ...f, state: "", after: "" })} aria-current={!f.state ? "page" : undefined} data-state="">
                All <span class="tab-n">{q ? int(totalOf(q)) : ""}</span>
              </Link>
            </li>
            {STATES.map((s) => (
              <li key={s.name}>
                <Link
                  to={urlOf({ ...f, state: s.name, after: "" })}
                  aria-current={f.state === s.name ? "page" : undefined}
                  data-state={s.name}
                  title={s.help}
                >
                  {s.label} <span class="tab-n">{q ? int(countOf(q, s.name)) : ""}</span>
                </Link>
              </li>
            ))}
          </ul>
        </nav>
      )}
      {!f.queue ? (
        queues && queues.length === 0 ? <Empty cmd={ENQUEUE_EXAMPLE}>No queues yet, so no tasks. Enqueue one:</Empty> : <Loading />
      ) : (
        <section class="panel" aria-label="Tasks">
          {state && (
            <BulkPanel
              filter={{ queue: f.queue, state: state.state, type: f.type, search: f.search, group: f.group }}
              count={q ? countOf(q, state.name) : undefined}
              filtered={filtered(f)}
              stateLabel={state.label.toLowerCase()}
              onDone={page.reload}
            />
          )}
          <SelectionBar tasks={tasks} selected={selected} onClear={() => setSelected(new Set())} onDone={page.reload} />
          {page.error && <ErrorBox error={page.error} what="Could not list the tasks" retry={page.reload} />}
          {page.loading && !page.data ? (
            <Loading what="Loading the tasks" />
          ) : page.data && tasks.length === 0 ? (
            <Empty>
              No {state ? state.label.toLowerCase() : ""} tasks in {f.queue}
              {filtered(f) ? " that match the filters" : ""}
              {f.after ? " on this page" : ""}.
            </Empty>
          ) : (
            tasks.length > 0 && <TaskTable tasks={tasks} selected={selected} onSelect={setSelected} />
          )}
          <nav class="pager" aria-label="Pages">
            {f.after ? (
              <Link to={urlOf({ ...f, after: trail.prev })} rel="prev" class="button">
                {trail.n === 0 ? "← First page" : "← Previous"}
              </Link>
            ) : (
              <span />
            )}
            <span class="muted" aria-live="polite">
              {trail.n ? `Page ${trail.n}` : "Page"}
              {page.data ? ` · ${tasks.length} shown` : ""}
            </span>
            {next ? (
              <button type="button" onClick={goNext}>
                Next →
              </button>
            ) : (
              <span />
            )}
          </nav>
        </section>
      )}
    </>
  );
}

/** filtered says whether f narrows its state's tasks beyond the queue. */
const filtered = (f: Filter) => f.type !== "" || f.search !== "" || f.group !== "";

// FilterForm edits the filter; its text fields are read when it is
// submitted (whatever changed them: typing, pasting, autofill), and reset
// when the URL changes the filter.
function FilterForm({ f, queueNames }: { f: Filter; queueNames: string[] }) {
  const names = queueNames.includes(f.queue) || !f.queue ? queueNames : [f.queue, ...queueNames];
  const submit = (e: Event) => {
    e.preventDefault();
    const data = new FormData(e.currentTarget as HTMLFormElement);
    const text = (k: string) => String(data.get(k) ?? "");
    navigate(urlOf({ ...f, type: text("type").trim(), search: text("search"), group: text("group").trim(), after: "" }));
  };
  return (
    <form class="filters" onSubmit={submit} role="search" aria-label="Filter tasks" key={`${f.type}\n${f.search}\n${f.group}`}>
      <div class="field">
        <label for="f-queue">Queue</label>
        <select id="f-queue" value={f.queue} onChange={(e) => navigate(urlOf({ ...f, queue: e.currentTarget.value, after: "" }))}>
          {names.map((n) => (
            <option key={n} value={n}>
              {n}
            </option>
          ))}
        </select>
      </div>
      <div class="field">
        <label for="f-type">Type</label>
        <input id="f-type" name="type" defaultValue={f.type} placeholder="any type" />
      </div>
      <div class="field">
        <label for="f-group">Group</label>
        <input id="f-group" name="group" defaultValue={f.group} placeholder="any group" />
      </div>
      <div class="field grow">
        <label for="f-search">Search</label>
        <input id="f-search" name="search" type="search" defaultValue={f.search} placeholder="task id, a metadata value or payload text" />
      </div>
      <div class="field">
        <label for="f-size">Per page</label>
        <select id="f-size" value={String(f.size)} onChange={(e) => navigate(urlOf({ ...f, size: Number(e.currentTarget.value), after: "" }))}>
          {PAGE_SIZES.map((n) => (
            <option key={n} value={String(n)}>
              {n}
            </option>
          ))}
        </select>
      </div>
      <div class="field actions-field">
        <button type="submit" class="primary">
          Filter
        </button>
        {filtered(f) && (
          <Link to={urlOf({ ...f, type: "", search: "", group: "", after: "" })} class="button">
            Clear
          </Link>
        )}
      </div>
    </form>
  );
}
