import type { TaskState } from "../gen/conveyor/v1/task_pb";
import { stateDef } from "../lib/states";

/** StateBadge names a task state, coloured by kind. */
export function StateBadge({ state }: { state: TaskState }) {
  const d = stateDef(state);
  return (
    <span class={`badge state-${d?.name ?? "unknown"}`} title={d?.help}>
      {d?.label ?? "Unknown"}
    </span>
  );
}
