import type { TaskInfo } from "../gen/conveyor/v1/task_pb";
import { TaskState } from "../gen/conveyor/v1/task_pb";
import { seg } from "../lib/router";
import { Link } from "../components/Link";
import { StateBadge } from "../components/StateBadge";
import { Time } from "../components/Time";

/**
 * TaskTable lists a page of tasks with a checkbox each for a selection;
 * with withQueue, each task's queue too (a list across queues).
 */
export function TaskTable({
  tasks,
  selected,
  onSelect,
  withQueue = false,
}: {
  tasks: TaskInfo[];
  selected: Set<string>;
  onSelect: (s: Set<string>) => void;
  withQueue?: boolean;
}) {
  const all = tasks.length > 0 && tasks.every((t) => selected.has(t.id));
  const some = !all && tasks.some((t) => selected.has(t.id));
  const toggle = (id: string) => {
    const s = new Set(selected);
    if (s.has(id)) s.delete(id);
    else s.add(id);
    onSelect(s);
  };
  return (
    <div class="table-wrap">
      <table class="tasks responsive">
        <caption class="sr-only">Tasks, ordered by id (the order they were enqueued in)</caption>
        <thead>
          <tr>
            <th scope="col" class="check">
              <input
                type="checkbox"
                aria-label={all ? "Unselect every task on this page" : "Select every task on this page"}
                checked={all}
                ref={(el) => {
                  if (el) el.indeterminate = some;
                }}
                onChange={() => onSelect(all ? new Set() : new Set(tasks.map((t) => t.id)))}
              />
            </th>
            <th scope="col">Task</th>
            {withQueue && <th scope="col">Queue</th>}
            <th scope="col">Type</th>
            <th scope="col">State</th>
            <th scope="col" class="num" title="Failed attempts so far, of the retry budget">
              Retried
            </th>
            <th scope="col">Enqueued</th>
            <th scope="col">Next / done</th>
            <th scope="col">Last error</th>
          </tr>
        </thead>
        <tbody>
          {tasks.map((t) => (
            <tr key={t.id} data-task={t.id} class={selected.has(t.id) ? "selected" : undefined}>
              <td class="check">
                <input type="checkbox" aria-label={`Select task ${t.id}`} checked={selected.has(t.id)} onChange={() => toggle(t.id)} />
              </td>
              <th scope="row" data-label="Task" class="mono">
                <Link to={`/tasks/${seg(t.id)}`}>{t.id}</Link>
              </th>
              {withQueue && (
                <td data-label="Queue">
                  <Link to={`/queues/${seg(t.queue)}`}>{t.queue}</Link>
                </td>
              )}
              <td data-label="Type" class="mono">
                {t.type}
              </td>
              <td data-label="State">
                <StateBadge state={t.state} />
              </td>
              <td data-label="Retried" class="num">
                {t.retried}/{t.maxRetry}
              </td>
              <td data-label="Enqueued">
                <Time ts={t.enqueuedAt} />
              </td>
              <td data-label="Next / done">
                {t.state === TaskState.SCHEDULED || t.state === TaskState.RETRY ? (
                  <Time ts={t.nextProcessAt} />
                ) : (
                  <Time ts={t.completedAt ?? t.startedAt} />
                )}
              </td>
              <td data-label="Last error" class="last-error" title={t.lastError || undefined}>
                {t.lastError || <span class="muted">—</span>}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
