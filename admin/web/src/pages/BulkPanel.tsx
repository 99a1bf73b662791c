import { useEffect, useRef, useState } from "preact/hooks";
import type { BulkTasksProgress } from "../gen/conveyor/v1/admin_pb";
import { actAll, type BulkFilter } from "../lib/actions";
import { asError, isAbort } from "../lib/api";
import { int } from "../lib/format";
import { refreshQueues } from "../lib/live";
import { ACTIONS, allows, type Action } from "../lib/states";
import { ConfirmButton } from "../components/ConfirmButton";
import { Notice } from "../components/Status";

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
  // label says what the running action acts on, as it was started: the
  // panel stays while the operator moves to another tab or filter.
  const [running, setRunning] = useState<{ label: string; past: string; p?: BulkTasksProgress } | undefined>();
  const [result, setResult] = useState<{ kind: "ok" | "error"; text: string } | undefined>();
  const ctrl = useRef<AbortController | null>(null);
  useEffect(() => () => ctrl.current?.abort(), []);
  const actions = ACTIONS.filter((a) => allows(a.action, filter.state));
  const what = filtered ? `every ${stateLabel} task that matches the filters` : `all ${count === undefined ? "" : int(count) + " "}${stateLabel} tasks`;

  const start = async (action: Action, past: string, label: string) => {
    const c = new AbortController();
    ctrl.current = c;
    setResult(undefined);
    setRunning({ label, past });
    let last: BulkTasksProgress | undefined;
    try {
      last = await actAll(action, filter, (p) => {
        last = p;
        setRunning({ label, past, p });
        refreshQueues();
      }, c.signal);
      const ok = Number(last?.succeeded ?? 0n);
      const failed = Number(last?.failed ?? 0n);
      let text = `Done: ${int(ok)} ${ok === 1 ? "task" : "tasks"} ${past}.`;
      if (failed) text += ` ${int(failed)} not: ${last?.firstError ?? ""}`;
      setResult({ kind: failed ? "error" : "ok", text });
    } catch (err) {
      const sofar = last ? ` ${int(last.succeeded)} ${past} before it stopped.` : "";
      setResult(isAbort(err) ? { kind: "ok", text: `Stopped.${sofar}` } : { kind: "error", text: asError(err).message + sofar });
    } finally {
      ctrl.current = null;
      setRunning(undefined);
      refreshQueues();
      onDone();
    }
  };

  if (actions.length === 0) return null;
  const p = running?.p;
  const doneN = p ? Number(p.succeeded + p.failed) : 0;
  const total = p ? Math.max(Number(p.total), doneN) : 0;
  return (
    <div class="bulk">
      {result && (
        <Notice kind={result.kind} onClose={() => setResult(undefined)}>
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
          <button type="button" onClick={() => ctrl.current?.abort()}>
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
              onConfirm={() => void start(a.action, a.past, `${a.label}: ${what} in ${filter.queue}`)}
            />
          ))}
        </div>
      )}
    </div>
  );
}
