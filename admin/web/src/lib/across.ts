// The task lists across queues: ListTasks has one queue per call, so the
// view lists each queue that holds tasks of the state (as ListQueues counts
// them), the first PER_QUEUE of each, and merges the answers by id.
import type { QueueInfo } from "../gen/conveyor/v1/admin_pb";
import type { TaskInfo } from "../gen/conveyor/v1/task_pb";
import { admin } from "./api";
import { STATES, countOf, stateByName, type StateDef } from "./states";

/**
 * PER_QUEUE is how many tasks of one state the view takes from each queue;
 * the rest are a link away, in that queue's task browser, which pages.
 */
export const PER_QUEUE = 100;

/** PARALLEL bounds the ListTasks calls in flight at once. */
const PARALLEL = 4;

/** FAILED names the view of every task that failed: retrying or archived. */
export const FAILED = "failed";

/**
 * statesOf is the states a view's name lists: "failed" is retry and
 * archived; a state's name, that state. Undefined for any other name.
 */
export function statesOf(name: string): StateDef[] | undefined {
  if (name === FAILED) return STATES.filter((s) => s.name === "retry" || s.name === "archived");
  const s = stateByName(name);
  return s ? [s] : undefined;
}

/** Slice is what one queue gave for one state. */
export interface Slice {
  queue: string;
  state: StateDef;
  /** shown is how many tasks the view lists from it. */
  shown: number;
  /** total is the queue's count for the state when listed (at least shown). */
  total: number;
  /** more is set when the queue holds more than the view shows. */
  more: boolean;
}

/** Across is the merged view. */
export interface Across {
  /** tasks are ordered by id (the order they were enqueued in), each once. */
  tasks: TaskInfo[];
  /** slices are the non-empty (queue, state) lists, by queue then state. */
  slices: Slice[];
  /** queues is how many queues the server has. */
  queues: number;
}

/** loadAcross lists the tasks in states of every queue, merged. */
export async function loadAcross(states: StateDef[], signal: AbortSignal): Promise<Across> {
  const queues = (await admin.listQueues({}, { signal })).queues;
  const jobs = wanted(queues, states);
  const answers = await inParallel(jobs, PARALLEL, async ({ queue, state }) => {
    const res = await admin.listTasks({ queue: queue.name, state: state.state, pageSize: PER_QUEUE }, { signal });
    return { queue, state, res };
  });
  const byId = new Map<string, TaskInfo>();
  const slices: Slice[] = [];
  for (const { queue, state, res } of answers) {
    // A task can move between two states' lists while they are read;
    // keyed by id, it shows once.
    for (const t of res.tasks) byId.set(t.id, t);
    if (res.tasks.length === 0) continue;
    slices.push({
      queue: queue.name,
      state,
      shown: res.tasks.length,
      total: Math.max(countOf(queue, state.name), res.tasks.length),
      more: res.nextPageToken !== "",
    });
  }
  const tasks = [...byId.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  return { tasks, slices, queues: queues.length };
}

/**
 * wanted is the (queue, state) pairs worth a call: those whose count is
 * not zero. A task that arrived since ListQueues answered waits for the
 * next refresh.
 */
function wanted(queues: QueueInfo[], states: StateDef[]): { queue: QueueInfo; state: StateDef }[] {
  return queues.flatMap((queue) => states.filter((s) => countOf(queue, s.name) > 0).map((state) => ({ queue, state })));
}

/** inParallel maps items through fn, at most n calls at once, keeping their order. */
async function inParallel<T, R>(items: T[], n: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i] as T);
    }
  };
  await Promise.all(Array.from({ length: Math.min(n, items.length) }, worker));
  return out;
}
