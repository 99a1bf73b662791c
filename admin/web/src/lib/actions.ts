// The operator actions on tasks, one at a time, on a selection, or on
// every task of a state.
import { TaskAction, type BulkTasksProgress, type BatchTasksResponse } from "../gen/conveyor/v1/admin_pb";
import type { TaskState } from "../gen/conveyor/v1/task_pb";
import { admin } from "./api";
import type { Action } from "./states";

/** actOne applies action to one task. */
export async function actOne(action: Action, id: string): Promise<void> {
  switch (action) {
    case "run":
      await admin.runTask({ id });
      return;
    case "cancel":
      await admin.cancelTask({ id });
      return;
    case "archive":
      await admin.archiveTask({ id });
      return;
    case "delete":
      await admin.deleteTask({ id });
      return;
  }
}

/** actMany applies action to the tasks ids, with one result per id. */
export function actMany(action: Action, ids: string[]): Promise<BatchTasksResponse> {
  switch (action) {
    case "run":
      return admin.batchRunTasks({ ids });
    case "cancel":
      return admin.batchCancelTasks({ ids });
    case "archive":
      return admin.batchArchiveTasks({ ids });
    case "delete":
      return admin.batchDeleteTasks({ ids });
  }
}

const wire: Record<Action, TaskAction> = {
  run: TaskAction.RUN,
  cancel: TaskAction.CANCEL,
  archive: TaskAction.ARCHIVE,
  delete: TaskAction.DELETE,
};

/** BulkFilter selects the tasks of a bulk action. */
export interface BulkFilter {
  queue: string;
  state: TaskState;
  type: string;
  search: string;
  group: string;
}

/**
 * actAll applies action to every task the filter matches, calling
 * progress with each report of the server; signal stops it between chunks.
 * It resolves with the last report.
 */
export async function actAll(
  action: Action,
  f: BulkFilter,
  progress: (p: BulkTasksProgress) => void,
  signal: AbortSignal,
): Promise<BulkTasksProgress | undefined> {
  let last: BulkTasksProgress | undefined;
  for await (const p of admin.bulkTasks({ action: wire[action], ...f }, { signal })) {
    last = p;
    progress(p);
  }
  return last;
}
