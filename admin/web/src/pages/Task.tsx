import { useState } from "preact/hooks";
import { toJsonString } from "@bufbuild/protobuf";
import type { TaskInfo } from "../gen/conveyor/v1/task_pb";
import { OnFailure, TaskOptionsSchema, TaskState } from "../gen/conveyor/v1/task_pb";
import { actOne } from "../lib/actions";
import { asError, tasks } from "../lib/api";
import { indentJSON } from "../lib/payload";
import { usePoll } from "../lib/poll";
import { refreshQueues } from "../lib/live";
import { navigate, seg, withQuery } from "../lib/router";
import { ACTIONS, allows, isTerminal, type Action } from "../lib/states";
import { useTitle } from "../lib/title";
import { ConfirmButton } from "../components/ConfirmButton";
import { KeyValues } from "../components/KeyValues";
import { Link } from "../components/Link";
import { PayloadView } from "../components/PayloadView";
import { StateBadge } from "../components/StateBadge";
import { Empty, ErrorBox, Loading, Notice } from "../components/Status";
import { Time } from "../components/Time";
import { DepGraph } from "../components/DepGraph";
import { listOf } from "./Tasks";

/**
 * TaskPage shows one task: its state and times, payload, metadata, errors
 * and retries, result, live progress, dependencies and dependents. It
 * refreshes every second while the task is not done.
 */
export function TaskPage({ id }: { id: string }) {
  useTitle(`Task ${id}`);
  const t = usePoll((signal) => tasks.getTask({ id }, { signal }), (info) => (isTerminal(info.state) ? 5000 : 1000), [id]);
  return (
    <>
      <p class="crumbs">
        <Link to="/tasks">Tasks</Link> /
        {t.data && (
          <>
            {" "}
            <Link to={listOf(t.data.queue)}>{t.data.queue}</Link> /
          </>
        )}
      </p>
      <div class="page-head">
        <h1>
          Task <span class="mono">{id}</span>
        </h1>
        {t.data && <StateBadge state={t.data.state} />}
      </div>
      {t.error && <ErrorBox error={t.error} what="Could not load the task" retry={t.reload} />}
      {!t.data ? t.error ? null : <Loading what="Loading the task" /> : <TaskBody task={t.data} reload={t.reload} />}
    </>
  );
}

function TaskBody({ task: t, reload }: { task: TaskInfo; reload: () => void }) {
  return (
    <>
      <TaskActions task={t} reload={reload} />
      {reportedProgress(t) && <Progress task={t} />}
      {t.lastError && (
        <section class="panel error-panel" aria-labelledby="err-h">
          <h2 id="err-h">Last error</h2>
          <pre class="code last-error-text" tabIndex={0}>
            {t.lastError}
          </pre>
          {outcomeUnknown(t) && <OutcomeUnknown />}
        </section>
      )}
      <section class="panel" aria-labelledby="sum-h">
        <h2 id="sum-h">Summary</h2>
        <Summary task={t} />
      </section>
      <section class="panel" aria-labelledby="payload-h">
        <h2 id="payload-h">Payload</h2>
        <PayloadView data={t.payload} contentType={t.contentType} label="Payload" />
      </section>
      <section class="panel" aria-labelledby="meta-h">
        <h2 id="meta-h">Metadata</h2>
        <KeyValues map={t.metadata} empty="No metadata." />
      </section>
      <section class="panel" aria-labelledby="hist-h">
        <h2 id="hist-h">Errors and retries</h2>
        <p class="muted">
          {t.retried} failed {t.retried === 1 ? "attempt" : "attempts"} of a budget of {t.maxRetry} retries.
        </p>
        {t.errors.length === 0 ? (
          <Empty>No failed attempts.</Empty>
        ) : (
          <div class="table-wrap">
            <table class="responsive errors">
              <thead>
                <tr>
                  <th scope="col" class="num">
                    Attempt
                  </th>
                  <th scope="col">Ended</th>
                  <th scope="col">Error</th>
                </tr>
              </thead>
              <tbody>
                {t.errors.map((e) => (
                  <tr key={e.attempt}>
                    <td class="num" data-label="Attempt">
                      {e.attempt}
                    </td>
                    <td data-label="Ended">
                      <Time ts={e.at} />
                    </td>
                    <td data-label="Error" class="pre">
                      {e.message}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </section>
      {(t.state === TaskState.COMPLETED || t.result.length > 0) && (
        <section class="panel" aria-labelledby="result-h">
          <h2 id="result-h">Result</h2>
          <PayloadView data={t.result} contentType="" label="Result" />
        </section>
      )}
      <Links task={t} />
      <section class="panel" aria-labelledby="opt-h">
        <h2 id="opt-h">Options as enqueued</h2>
        {t.options ? (
          <pre class="code" tabIndex={0}>
            {indentJSON(toJsonString(TaskOptionsSchema, t.options)) ?? ""}
          </pre>
        ) : (
          <Empty>No options: the server defaults apply.</Empty>
        )}
      </section>
    </>
  );
}

/**
 * outcomeUnknown reports whether t is an at-most-once task whose authorized
 * start ended with no result (a lost worker, a lapsed lease, a RELEASED
 * answer): the server archived it rather than run it again. Once run
 * again, its last error is history.
 */
function outcomeUnknown(t: TaskInfo): boolean {
  return t.state === TaskState.ARCHIVED && t.lastError.startsWith("outcome unknown:");
}

function OutcomeUnknown() {
  return (
    <div class="warning outcome-unknown">
      <p>
        <strong>This task may or may not have run.</strong> Its worker was allowed to start it and no outcome came back, so the
        server archived it rather than run it twice.
      </p>
      <p>Check whether its work was done. Run now runs it again: choose it only if running it a second time is safe.</p>
    </div>
  );
}

function TaskActions({ task: t, reload }: { task: TaskInfo; reload: () => void }) {
  const [busy, setBusy] = useState(false);
  const [note, setNote] = useState<{ kind: "ok" | "error"; text: string } | undefined>();
  const act = async (a: Action, past: string) => {
    setBusy(true);
    setNote(undefined);
    try {
      await actOne(a, t.id);
      refreshQueues();
      if (a === "delete") {
        navigate(listOf(t.queue));
        return;
      }
      setNote({ kind: "ok", text: `Task ${past}.` });
    } catch (err) {
      setNote({ kind: "error", text: asError(err).message });
    } finally {
      setBusy(false);
      reload();
    }
  };
  const actions = ACTIONS.filter((a) => allows(a.action, t.state));
  return (
    <div class="task-actions">
      {note && (
        <Notice kind={note.kind} onClose={() => setNote(undefined)}>
          {note.text}
        </Notice>
      )}
      {actions.length > 0 && (
        <div class="toolbar" role="toolbar" aria-label="Actions on this task">
          {actions.map((a) =>
            a.danger ? (
              <ConfirmButton
                key={a.action}
                action={a.action}
                label={a.label}
                question={`${a.label} this task?`}
                danger
                disabled={busy}
                onConfirm={() => void act(a.action, a.past)}
              />
            ) : (
              <button key={a.action} type="button" disabled={busy} onClick={() => void act(a.action, a.past)}>
                {a.label}
              </button>
            ),
          )}
        </div>
      )}
    </div>
  );
}

/**
 * reportedProgress reports whether t's handler said anything of its
 * progress: a bar at 0% with no message is one it never reported, which
 * tells nothing.
 */
function reportedProgress(t: TaskInfo): boolean {
  return t.progressPercent > 0 || t.progressMessage !== "";
}

/** waitsForTime reports whether t waits for its next_process_at (a delay or a backoff). */
function waitsForTime(t: TaskInfo): boolean {
  return t.state === TaskState.SCHEDULED || t.state === TaskState.RETRY;
}

function Progress({ task: t }: { task: TaskInfo }) {
  return (
    <section class="panel" aria-labelledby="prog-h">
      <h2 id="prog-h">Progress</h2>
      <div class="progress-row">
        <progress id="task-progress" max={100} value={t.progressPercent} aria-labelledby="prog-h" />
        <span>{t.progressPercent}%</span>
      </div>
      {t.progressMessage && <p>{t.progressMessage}</p>}
    </section>
  );
}

function Row({ label, children }: { label: string; children: preact.ComponentChildren }) {
  return (
    <div>
      <dt>{label}</dt>
      <dd>{children}</dd>
    </div>
  );
}

function Summary({ task: t }: { task: TaskInfo }) {
  const o = t.options;
  return (
    <dl class="kv summary">
      <Row label="Queue">
        <Link to={`/queues/${seg(t.queue)}`}>{t.queue}</Link>
      </Row>
      <Row label="Type">
        <span class="mono">{t.type}</span>
      </Row>
      <Row label="Priority">{t.priority}</Row>
      <Row label="Retried">
        {t.retried} of {t.maxRetry}
      </Row>
      <Row label="Enqueued">
        <Time ts={t.enqueuedAt} />
      </Row>
      {/* Only what means something in the task's state: when it runs
          next while it waits for a time; when it started once it has;
          when it ended once it is done. */}
      {waitsForTime(t) && (
        <Row label={t.state === TaskState.RETRY ? "Next attempt" : "Runs"}>
          <Time ts={t.nextProcessAt} />
        </Row>
      )}
      {t.startedAt && (
        <Row label={t.state === TaskState.ACTIVE ? "Started" : "Last started"}>
          <Time ts={t.startedAt} />
        </Row>
      )}
      {isTerminal(t.state) && t.completedAt && (
        <Row label="Done">
          <Time ts={t.completedAt} />
        </Row>
      )}
      {t.expiresAt && (
        <Row label="Expires">
          <Time ts={t.expiresAt} />
        </Row>
      )}
      {t.group && (
        <Row label="Group">
          <Link to={withQuery("/groups", { queue: t.queue })}>{t.group}</Link>
        </Row>
      )}
      {t.concurrencyKey && <Row label="Concurrency key">{t.concurrencyKey}</Row>}
      {o?.uniqueKey && <Row label="Unique key">{o.uniqueKey}</Row>}
      {o?.atMostOnce && (
        <Row label="Delivery">
          at most once <span class="muted">(never run again by the server if its outcome is lost)</span>
        </Row>
      )}
      {t.sessionId && (
        <Row label="Worker session">
          <Link to="/workers" class="mono">
            {t.sessionId}
          </Link>
        </Row>
      )}
      {t.attemptId && (
        <Row label="Attempt">
          <span class="mono">{t.attemptId}</span>
        </Row>
      )}
    </dl>
  );
}

const onFailure: Record<OnFailure, string> = {
  [OnFailure.UNSPECIFIED]: "block",
  [OnFailure.BLOCK]: "block",
  [OnFailure.CASCADE_CANCEL]: "cancel this task",
  [OnFailure.CONTINUE]: "continue",
};

function Links({ task: t }: { task: TaskInfo }) {
  return (
    <section class="panel" aria-labelledby="deps-h">
      <h2 id="deps-h">Dependencies</h2>
      <div class="two">
        <div>
          <h3>Depends on</h3>
          {t.dependsOn.length === 0 ? (
            <Empty>Nothing: this task waits for no other.</Empty>
          ) : (
            <ul class="links">
              {t.dependsOn.map((d) => (
                <li key={d.taskId}>
                  <Link to={`/tasks/${seg(d.taskId)}`} class="mono">
                    {d.taskId}
                  </Link>{" "}
                  <StateBadge state={d.state} /> <span class="muted">if it fails: {onFailure[d.onFailure]}</span>
                </li>
              ))}
            </ul>
          )}
        </div>
        <div>
          <h3>Dependents</h3>
          {t.dependents.length === 0 ? (
            <Empty>No task waits for this one.</Empty>
          ) : (
            <ul class="links">
              {t.dependents.map((d) => (
                <li key={d.taskId}>
                  <Link to={`/tasks/${seg(d.taskId)}`} class="mono">
                    {d.taskId}
                  </Link>{" "}
                  <StateBadge state={d.state} />
                </li>
              ))}
            </ul>
          )}
        </div>
      </div>
      {(t.dependsOn.length > 0 || t.dependents.length > 0) && (
        <>
          <h3 id="graph-h">Graph</h3>
          <DepGraph id={t.id} />
        </>
      )}
    </section>
  );
}
