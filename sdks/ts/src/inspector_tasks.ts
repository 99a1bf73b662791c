import { Code } from "@connectrpc/connect";
import { codeOf, type ConveyorError, errorFor } from "./errors.js";
import type { BatchTasksResponse } from "./gen/conveyor/v1/admin_pb.js";
import { type TaskInfo, TaskState } from "./gen/conveyor/v1/task_pb.js";
import { checkInt32, type InspectorRpc, invalid, rpc } from "./inspector_rpc.js";
import type { CallOptions } from "./client.js";

/** ListTasksOptions select the tasks listTasks and allTasks list. */
export interface ListTasksOptions extends CallOptions {
  /** The queue to list; required. */
  queue: string;
  /** Keeps the tasks in this state; every state when unset (or TaskState.UNSPECIFIED). */
  state?: TaskState;
  /** Keeps the tasks of this type (exact match); every type when unset. */
  type?: string;
  /**
   * Keeps the tasks whose id, a metadata value or payload contains this
   * case-sensitive substring (at most 1 KiB); every task when unset.
   */
  search?: string;
  /** Keeps the tasks enqueued with this aggregation group (exact match), in whatever state. */
  group?: string;
  /** How many tasks a page holds at most, 1..1000. Default 100 (the server's) when unset or 0. */
  pageSize?: number;
  /** Continues a listing: a TaskPage's nextPageToken, given with the same filters. Unset starts at the first task. */
  pageToken?: string;
}

/**
 * AllTasksOptions select the tasks allTasks yields: those of one queue as
 * for listTasks, or, without a queue, those of every queue.
 */
export interface AllTasksOptions extends Omit<ListTasksOptions, "queue"> {
  /** The queue to list; every queue the server knows, in name order, when unset. */
  queue?: string;
}

/** TaskPage is one page of a listing. */
export interface TaskPage {
  /** The tasks, in id order (enqueue order for ids the server made), whatever their types and states. */
  tasks: TaskInfo[];
  /** Continues the listing (ListTasksOptions.pageToken); empty on the last page. */
  nextPageToken: string;
}

/** TaskActionResult is the outcome of one id of a batch action. */
export interface TaskActionResult {
  /** The task's id, as given. */
  id: string;
  /**
   * Why the action did not apply to the task; unset when it did. It holds
   * the server's message for the task (such as "task 01J...: not found")
   * and is of the class of the code the server gives for it, as the
   * single-task call's would be: NotFoundError for an unknown id,
   * FailedPreconditionError for a task in a state the action does not
   * take.
   */
  error?: ConveyorError;
}

/** listTasks is Inspector.listTasks. */
export async function listTasks(c: InspectorRpc, o: ListTasksOptions): Promise<TaskPage> {
  if (o.pageSize !== undefined) checkInt32("pageSize", o.pageSize);
  const req = {
    queue: o.queue, state: o.state ?? TaskState.UNSPECIFIED, type: o.type ?? "", search: o.search ?? "",
    group: o.group ?? "", pageSize: o.pageSize ?? 0, pageToken: o.pageToken ?? "",
  };
  const res = await rpc(o.signal, () => c.admin.listTasks(req, { signal: o.signal }));
  return { tasks: res.tasks, nextPageToken: res.nextPageToken };
}

/** allTasks is Inspector.allTasks. */
export async function* allTasks(c: InspectorRpc, o: AllTasksOptions): AsyncGenerator<TaskInfo, void, undefined> {
  if (o.queue !== undefined && o.queue !== "") {
    yield* queueTasks(c, { ...o, queue: o.queue });
    return;
  }
  // A page token names a place in one queue's listing: across queues it means nothing.
  if (o.pageToken) invalid("pageToken needs the queue it came from");
  const queues = await rpc(o.signal, () => c.admin.listQueues({}, { signal: o.signal }));
  for (const q of queues.queues) yield* queueTasks(c, { ...o, queue: q.name });
}

/** queueTasks yields the tasks of one queue's listing, a page at a time. */
async function* queueTasks(c: InspectorRpc, o: ListTasksOptions): AsyncGenerator<TaskInfo, void, undefined> {
  let pageToken = o.pageToken;
  for (;;) {
    const page = await listTasks(c, { ...o, pageToken });
    yield* page.tasks;
    if (page.nextPageToken === "") return;
    pageToken = page.nextPageToken;
  }
}

/** getTask is Inspector.getTask. */
export async function getTask(c: InspectorRpc, id: string, call: CallOptions): Promise<TaskInfo> {
  return rpc(call.signal, () => c.tasks.getTask({ id }, { signal: call.signal }));
}

/** The single-task actions, by their AdminService method names. */
export type TaskActionMethod = "cancelTask" | "runTask" | "archiveTask";

/** taskAction is Inspector.cancelTask, runTask and archiveTask. */
export async function taskAction(c: InspectorRpc, method: TaskActionMethod, id: string, call: CallOptions): Promise<TaskInfo> {
  return rpc(call.signal, () => c.admin[method]({ id }, { signal: call.signal }));
}

/** deleteTask is Inspector.deleteTask. */
export async function deleteTask(c: InspectorRpc, id: string, call: CallOptions): Promise<void> {
  await rpc(call.signal, () => c.admin.deleteTask({ id }, { signal: call.signal }));
}

/** The batch actions, by their AdminService method names. */
export type BatchActionMethod = "batchCancelTasks" | "batchRunTasks" | "batchArchiveTasks" | "batchDeleteTasks";

/** batchAction is Inspector.batchCancelTasks and its siblings. */
export async function batchAction(
  c: InspectorRpc,
  method: BatchActionMethod,
  ids: string[],
  call: CallOptions,
): Promise<TaskActionResult[]> {
  const res = await rpc(call.signal, () => c.admin[method]({ ids }, { signal: call.signal }));
  return batchResults(res, ids.length);
}

function batchResults(res: BatchTasksResponse, sent: number): TaskActionResult[] {
  if (res.results.length !== sent) {
    throw errorFor(Code.Internal, `conveyor: the server's batch response holds ${res.results.length} results for ${sent} ids`);
  }
  return res.results.map((r) => (r.error === "" ? { id: r.id } : { id: r.id, error: errorFor(codeOf(r.code), r.error) }));
}
