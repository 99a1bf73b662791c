import { Code } from "@connectrpc/connect";
import { callError, errorFor } from "./errors.js";
import type { BulkTasksProgress, TaskAction } from "./gen/conveyor/v1/admin_pb.js";
import { TaskState } from "./gen/conveyor/v1/task_pb.js";
import type { InspectorRpc } from "./inspector_rpc.js";
import type { CallOptions } from "./client.js";

/**
 * BulkTasksOptions select the tasks bulkTasks acts on, as ListTasksOptions
 * select a listing's. Aborting the signal stops the action between
 * chunks: the chunks done stay done.
 */
export interface BulkTasksOptions extends CallOptions {
  /** The queue whose tasks are acted on; required. */
  queue: string;
  /** The state of the tasks acted on; required. */
  state: TaskState;
  /** Keeps the tasks of this type (exact match); every type when unset. */
  type?: string;
  /** Keeps the tasks whose id, a metadata value or payload contains this case-sensitive substring. */
  search?: string;
  /** Keeps the tasks enqueued with this aggregation group. */
  group?: string;
}

/** BulkTasksCallOptions are bulkTasks' options and where its progress goes. */
export interface BulkTasksCallOptions extends BulkTasksOptions {
  /**
   * Called with each progress report the server sends, after each chunk
   * of tasks, the last one with `done` set. The stream is read between
   * calls, so a slow onProgress slows the call.
   */
  onProgress?: (progress: BulkTasksProgress) => void;
}

/** bulkTasksProgress is Inspector.bulkTasksProgress. */
export async function* bulkTasksProgress(
  c: InspectorRpc,
  action: TaskAction,
  o: BulkTasksOptions,
): AsyncGenerator<BulkTasksProgress, void, undefined> {
  const req = {
    action, queue: o.queue, state: o.state ?? TaskState.UNSPECIFIED, type: o.type ?? "", search: o.search ?? "",
    group: o.group ?? "",
  };
  let done = false;
  try {
    for await (const p of c.admin.bulkTasks(req, { signal: o.signal })) {
      done = p.done;
      yield p;
    }
  } catch (err) {
    throw callError(err, o.signal);
  }
  if (!done) throw errorFor(Code.Internal, "conveyor: the server's BulkTasks stream ended without its final progress");
}

/** bulkTasks is Inspector.bulkTasks. */
export async function bulkTasks(c: InspectorRpc, action: TaskAction, o: BulkTasksCallOptions): Promise<BulkTasksProgress> {
  let last: BulkTasksProgress | undefined;
  for await (const p of bulkTasksProgress(c, action, o)) {
    last = p;
    o.onProgress?.(p);
  }
  // bulkTasksProgress ends only after a report with done set.
  return last as BulkTasksProgress;
}
