import { useState } from "preact/hooks";
import type { TaskInfo } from "../gen/conveyor/v1/task_pb";
import { actMany } from "../lib/actions";
import { asError } from "../lib/api";
import { int } from "../lib/format";
import { refreshQueues } from "../lib/live";
import { ACTIONS, allows, type Action } from "../lib/states";
import { ConfirmButton } from "../components/ConfirmButton";
import { Notice } from "../components/Status";

/**
 * SelectionBar acts on the selected tasks of the page (the Batch* RPCs,
 * one result per task) and says how it went.
 */
export function SelectionBar({
  tasks,
  selected,
  onClear,
  onDone,
}: {
  tasks: TaskInfo[];
  selected: Set<string>;
  onClear: () => void;
  onDone: () => void;
}) {
  const [busy, setBusy] = useState(false);
  const [result, setResult] = useState<{ kind: "ok" | "error"; text: string } | undefined>();
  const chosen = tasks.filter((t) => selected.has(t.id));
  const run = async (action: Action, past: string) => {
    const ids = chosen.filter((t) => allows(action, t.state)).map((t) => t.id);
    setBusy(true);
    setResult(undefined);
    try {
      const res = await actMany(action, ids);
      const failed = res.results.filter((r) => r.error);
      const ok = res.results.length - failed.length;
      const skipped = chosen.length - ids.length;
      let text = `${int(ok)} ${ok === 1 ? "task" : "tasks"} ${past}.`;
      if (failed.length) text += ` ${int(failed.length)} failed: ${failed[0]?.error ?? ""}`;
      if (skipped) text += ` ${int(skipped)} skipped (the action does not apply to their state).`;
      setResult({ kind: failed.length ? "error" : "ok", text });
      onClear();
    } catch (err) {
      setResult({ kind: "error", text: asError(err).message });
    } finally {
      setBusy(false);
      refreshQueues();
      onDone();
    }
  };
  return (
    <div class="selection">
      {result && (
        <Notice kind={result.kind} onClose={() => setResult(undefined)}>
          {result.text}
        </Notice>
      )}
      {chosen.length > 0 && (
        <div class="toolbar" role="toolbar" aria-label="Actions on the selected tasks">
          <strong>{int(chosen.length)} selected</strong>
          {ACTIONS.map((a) => {
            const n = chosen.filter((t) => allows(a.action, t.state)).length;
            return (
              <ConfirmButton
                key={a.action}
                action={a.action}
                label={`${a.label} (${n})`}
                question={`${a.label}: ${n} ${n === 1 ? "task" : "tasks"}?`}
                danger={a.danger}
                disabled={busy || n === 0}
                onConfirm={() => void run(a.action, a.past)}
              />
            );
          })}
          <button type="button" class="link" onClick={onClear}>
            Clear selection
          </button>
        </div>
      )}
    </div>
  );
}
