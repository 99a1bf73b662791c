import { useEffect } from "preact/hooks";
import type { BulkTasksProgress } from "../gen/conveyor/v1/admin_pb";
import { actAll, type BulkFilter } from "../lib/actions";
import { asError, isAbort } from "../lib/api";
import { int } from "../lib/format";
import { refreshQueues } from "../lib/live";
import { ACTIONS, allows, type Action } from "../lib/states";
import { store, useStore } from "../lib/store";
import { ConfirmButton } from "../components/ConfirmButton";
import { Notice } from "../components/Status";

// The running action and the outcome of the last one live outside the
// panel: a bulk action goes on while the operator moves to another tab or
// page (only Stop ends it), and the panel shows it wherever it is shown.
// label says what the action acts on, as it was started.
interface Job {
  label: string;
  past: string;
  p?: BulkTasksProgress;
  ctrl: AbortController;
}
const job = store<Job | undefined>(undefined);
const outcome = store<{ kind: "ok" | "error"; text: string } | undefined>(undefined);
// finished is the shown panel's onDone, called when an action ends.
let finished: (() => void) | undefined;

async function start(action: Action, past: string, label: string, filter: BulkFilter): Promise<void> {
  if (job.get()) return;
  const ctrl = new AbortController();
  outcome.set(undefined);
  job.set({ label, past, ctrl });
  let last: BulkTasksProgress | undefined;
  try {
    last = await actAll(action, filter, (p) => {
      last = p;
      job.set({ label, past, ctrl, p });
      refreshQueues();
    }, ctrl.signal);
    const ok = Number(last?.succeeded ?? 0n);
    const failed = Number(last?.failed ?? 0n);
    let text = `Done: ${int(ok)} ${ok === 1 ? "task" : "tasks"} ${past}.`;
    if (failed) text += ` ${int(failed)} not: ${last?.firstError ?? ""}`;
    outcome.set({ kind: failed ? "error" : "ok", text });
  } catch (err) {
    const sofar = last ? ` ${int(last.succeeded)} ${past} before it stopped.` : "";
    outcome.set(isAbort(err) ? { kind: "ok", text: `Stopped.${sofar}` } : { kind: "error", text: asError(err).message + sofar });
  } finally {
    job.set(undefined);
    refreshQueues();
    finished?.();
  }
}

/**
 * BulkPanel applies an action to every task of the state (and the type
 * and search filters) on the server, in chunks, showing its progress; it
 * can be stopped between chunks.
 */
export function BulkPanel({
  filter,
  count,
  filtered,
  stateLabel,
  onDone,
}: {
  filter: BulkFilter;
  count: number | undefined;
  filtered: boolean;
  stateLabel: string;
  onDone: () => void;
}) {
  const running = useStore(job);
  const result = useStore(outcome);
  useEffect(() => {
    finished = onDone;
    return () => {
      if (finished === onDone) finished = undefined;
    };
  }, [onDone]);
  // An outcome is for the visit that sees it.
  useEffect(
    () => () => {
      if (!job.get()) outcome.set(undefined);
    },
    [],
  );
  const actions = ACTIONS.filter((a) => allows(a.action, filter.state));
  const what = filtered ? `every ${stateLabel} task that matches the filters` : `all ${count === undefined ? "" : int(count) + " "}${stateLabel} tasks`;

  if (actions.length === 0) return null;
  const p = running?.p;
  const doneN = p ? Number(p.succeeded + p.failed) : 0;
  const total = p ? Math.max(Number(p.total), doneN) : 0;
  return (
    <div class="bulk">
      {result && (
        <Notice kind={result.kind} onClose={() => outcome.set(undefined)}>
          {result.text}
        </Notice>
      )}
      {running ? (
        <div class="bulk-progress" role="status" aria-live="polite">
          <label for="bulk-progress">{running.label}</label>
          <progress id="bulk-progress" max={total || 1} value={total ? doneN : undefined} />
          <span>
            {p ? `${int(doneN)} of ${int(total)}` : "Starting…"}
            {p && p.failed > 0n ? ` · ${int(p.failed)} failed` : ""}
          </span>
          <button type="button" onClick={() => running.ctrl.abort()}>
            Stop
          </button>
        </div>
      ) : (
        <div class="toolbar" role="toolbar" aria-label={`Actions on ${what}`}>
          <span class="muted">All {stateLabel}{filtered ? " (filtered)" : ""}:</span>
          {actions.map((a) => (
            <ConfirmButton
              key={a.action}
              action={a.action}
              label={`${a.label} all`}
              question={`${a.label}: ${what} in ${filter.queue}?`}
              danger={a.danger}
              disabled={count === 0 && !filtered}
              onConfirm={() => void start(a.action, a.past, `${a.label}: ${what} in ${filter.queue}`, filter)}
            />
          ))}
        </div>
      )}
    </div>
  );
}
