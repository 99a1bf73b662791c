import type { WorkerInfo } from "../gen/conveyor/v1/admin_pb";
import { TaskState, type TaskInfo } from "../gen/conveyor/v1/task_pb";
import { admin } from "../lib/api";
import { WORKER_EXAMPLE } from "../lib/cli";
import { usePoll } from "../lib/poll";
import { seg } from "../lib/router";
import { useTitle } from "../lib/title";
import { Chips } from "../components/KeyValues";
import { Link } from "../components/Link";
import { Empty, ErrorBox, Loading } from "../components/Status";
import { Time } from "../components/Time";
import { ReleasesPanel } from "./Releases";

/** SHOWN_TASKS is how many in-flight task links a worker shows before "more". */
const SHOWN_TASKS = 5;

/**
 * WorkersPage lists the live worker sessions (of every node, when several
 * share a database, with the node each is on), and the queues' push
 * endpoints: the queues each serves and their weights, the task types each
 * takes, its release, labels, the tasks in flight and the latest heartbeat.
 * Below, the releases seen, each of which can be drained.
 */
export function WorkersPage() {
  useTitle("Workers");
  const w = usePoll(loadWorkers, 2000, []);
  const workers = w.data?.workers ?? [];
  const held = w.data?.held ?? new Map<string, TaskInfo>();
  // The Node column shows only when the server is one of several nodes
  // sharing a database: a lone node has nothing to tell apart.
  const nodes = workers.some((x) => x.nodeId !== "");
  return (
    <>
      <div class="page-head">
        <h1>Workers</h1>
        {w.data && <span class="muted">{workers.length} connected</span>}
      </div>
      {w.error && <ErrorBox error={w.error} what="Could not list the workers" retry={w.reload} />}
      {!w.data ? (
        w.error ? null : <Loading />
      ) : workers.length === 0 ? (
        <Empty cmd={WORKER_EXAMPLE}>
          No worker is connected. A worker appears here when it opens a session: run one built on an SDK (docs/sdks.md), or,
          in a checkout of the repository, the example worker, which serves the queue default:
        </Empty>
      ) : (
        <div class="table-wrap panel">
          <table class="responsive workers">
            <thead>
              <tr>
                <th scope="col">Session</th>
                <th scope="col">Host (pid)</th>
                {nodes && <th scope="col">Node</th>}
                <th scope="col">Queues (weight)</th>
                <th scope="col">Labels</th>
                <th scope="col" class="num" title="Tasks held now / the concurrency the worker declared">
                  In flight
                </th>
                <th scope="col">Tasks</th>
                <th scope="col">Last heartbeat</th>
                <th scope="col">Connected</th>
                <th scope="col">SDK</th>
              </tr>
            </thead>
            <tbody>
              {workers.map((x) => (
                <WorkerRow key={x.sessionId} w={x} nodes={nodes} held={held} />
              ))}
            </tbody>
          </table>
        </div>
      )}
      <ReleasesPanel onDrained={w.reload} />
    </>
  );
}

/**
 * loadWorkers lists the sessions, and the tasks they hold with their types
 * and progress: WorkerInfo names the held tasks only, so the active tasks
 * of each queue a busy worker serves are listed too (one call a queue, up
 * to MAX_ACTIVE of them; a task past that shows its id alone).
 */
async function loadWorkers(signal: AbortSignal): Promise<{ workers: WorkerInfo[]; held: Map<string, TaskInfo> }> {
  const { workers } = await admin.listWorkers({}, { signal });
  const queues = new Set(workers.filter((x) => x.taskIds.length > 0).flatMap((x) => Object.keys(x.queues)));
  const lists = await Promise.all(
    [...queues].map((queue) =>
      admin.listTasks({ queue, state: TaskState.ACTIVE, pageSize: MAX_ACTIVE }, { signal }).then(
        (r) => r.tasks,
        () => [] as TaskInfo[], // the ids still show; a queue deleted meanwhile has none
      ),
    ),
  );
  return { workers, held: new Map(lists.flat().map((t) => [t.id, t])) };
}

/** MAX_ACTIVE is how many active tasks of one queue the page reads for their types and progress. */
const MAX_ACTIVE = 1000;

function HeldTasks({ ids, held }: { ids: string[]; held: Map<string, TaskInfo> }) {
  return (
    <ul class="links held">
      {ids.map((id) => {
        const t = held.get(id);
        return (
          <li key={id} data-held={id}>
            <Link to={`/tasks/${seg(id)}`} class="mono">
              {id}
            </Link>
            {t && (
              <>
                {" "}
                <span class="mono muted">{t.type}</span>
                {(t.progressPercent > 0 || t.progressMessage) && (
                  <span class="held-progress">
                    <progress max={100} value={t.progressPercent} aria-label={`Progress of ${id}`} /> {t.progressPercent}%
                    {t.progressMessage && <span class="muted"> {t.progressMessage}</span>}
                  </span>
                )}
              </>
            )}
          </li>
        );
      })}
    </ul>
  );
}

/** PROCESS_LABELS are the labels the SDKs send by default, shown in their own column. */
const PROCESS_LABELS = ["host", "pid"];

/** HostPid shows where a worker runs, from its host and pid labels. */
function HostPid({ w }: { w: WorkerInfo }) {
  const host = w.labels["host"];
  const pid = w.labels["pid"];
  if (!host && !pid) return <span class="muted">—</span>;
  return (
    <span class="host">
      <span class="mono">{host || "?"}</span>
      {pid && <span class="muted mono"> ({pid})</span>}
    </span>
  );
}

/** otherLabels is w's labels but host and pid. */
function otherLabels(w: WorkerInfo): Record<string, string> {
  return Object.fromEntries(Object.entries(w.labels).filter(([k]) => !PROCESS_LABELS.includes(k) || isPush(w)));
}

/**
 * isPush reports whether w is a queue's push endpoint rather than a session
 * (docs/push.md: session id "push:<queue>", labels["push"] its URL).
 */
function isPush(w: WorkerInfo): boolean {
  return w.sessionId.startsWith("push:") && "push" in w.labels;
}

function WorkerRow({ w, nodes, held }: { w: WorkerInfo; nodes: boolean; held: Map<string, TaskInfo> }) {
  const first = w.taskIds.slice(0, SHOWN_TASKS);
  const rest = w.taskIds.slice(SHOWN_TASKS);
  return (
    <tr data-session={w.sessionId}>
      <th scope="row" data-label="Session">
        <div>
          <span class="mono">{w.sessionId}</span>
          <Release w={w} />
        </div>
      </th>
      <td data-label="Host (pid)">
        <HostPid w={w} />
      </td>
      {nodes && (
        <td data-label="Node" class="mono">
          {w.nodeId || <span class="muted">—</span>}
        </td>
      )}
      <td data-label="Queues (weight)">
        <div>
          <Chips map={w.queues} />
          <Types w={w} />
          {w.batchTypes.length > 0 && <p class="muted">batches: {w.batchTypes.join(", ")}</p>}
        </div>
      </td>
      <td data-label="Labels">
        <Chips map={otherLabels(w)} />
      </td>
      <td data-label="In flight" class="num">
        {w.inFlight}/{w.concurrency}
      </td>
      <td data-label="Tasks">
        {w.taskIds.length === 0 ? (
          <span class="muted">idle</span>
        ) : (
          <>
            <HeldTasks ids={first} held={held} />
            {rest.length > 0 && (
              <details>
                <summary>{rest.length} more</summary>
                <HeldTasks ids={rest} held={held} />
              </details>
            )}
          </>
        )}
      </td>
      <td data-label="Last heartbeat">
        {/* A push endpoint has no session to heartbeat: none is "yet" to come. */}
        <Time ts={w.lastHeartbeatAt} empty={isPush(w) ? "—" : "none yet"} />
      </td>
      <td data-label="Connected">
        <Time ts={w.connectedAt} />
      </td>
      <td data-label="SDK">{w.sdkVersion || <span class="muted">—</span>}</td>
    </tr>
  );
}

/**
 * Types shows the task types a worker takes (none named: every type), and
 * whether it asks before it starts an at-most-once task (only such a
 * worker is given one; a push endpoint never is).
 */
function Types({ w }: { w: WorkerInfo }) {
  return (
    <>
      <p class="types">
        {w.types.length === 0 ? (
          <span class="muted">all types</span>
        ) : (
          <>
            <span class="muted">types:</span> <span class="mono">{w.types.join(", ")}</span>
          </>
        )}
      </p>
      {w.startAuthorization && <p class="muted authorizes">asks before starting at-most-once tasks</p>}
      {isPush(w) && <p class="muted">never at-most-once tasks</p>}
    </>
  );
}

/**
 * Release shows a session's release ("unversioned" when it names none),
 * marked when it was drained; a push endpoint has none.
 */
function Release({ w }: { w: WorkerInfo }) {
  if (isPush(w)) return null;
  return (
    <p class="release">
      {w.releaseId ? (
        <>
          <span class="muted">release</span> <span class="mono">{w.releaseId}</span>
          {w.draining && (
            <>
              {" "}
              <span class="badge draining">Draining</span>
            </>
          )}
        </>
      ) : (
        <span class="muted">unversioned</span>
      )}
    </p>
  );
}
