import { TaskState } from "../gen/conveyor/v1/task_pb";
import type { QueueInfo } from "../gen/conveyor/v1/admin_pb";

/** StateName is a state as the URLs and QueueInfo's fields name it. */
export type StateName =
  | "pending"
  | "active"
  | "scheduled"
  | "retry"
  | "blocked"
  | "aggregating"
  | "completed"
  | "archived"
  | "canceled";

/** StateDef describes one task state for display. */
export interface StateDef {
  name: StateName;
  state: TaskState;
  label: string;
  /** help says what a task in this state waits for. */
  help: string;
}

/** STATES lists the states in the order a task usually passes them. */
export const STATES: StateDef[] = [
  { name: "pending", state: TaskState.PENDING, label: "Pending", help: "ready, waiting for a worker" },
  { name: "active", state: TaskState.ACTIVE, label: "Active", help: "running on a worker" },
  { name: "scheduled", state: TaskState.SCHEDULED, label: "Scheduled", help: "waiting for their process time" },
  { name: "retry", state: TaskState.RETRY, label: "Retry", help: "failed, waiting out their backoff" },
  { name: "blocked", state: TaskState.BLOCKED, label: "Blocked", help: "waiting for their dependencies" },
  { name: "aggregating", state: TaskState.AGGREGATING, label: "Aggregating", help: "waiting in a group" },
  { name: "completed", state: TaskState.COMPLETED, label: "Completed", help: "succeeded (kept for their retention)" },
  { name: "archived", state: TaskState.ARCHIVED, label: "Archived", help: "failed for good, or expired" },
  { name: "canceled", state: TaskState.CANCELED, label: "Canceled", help: "canceled by an operator" },
];

const byState = new Map(STATES.map((s) => [s.state, s]));
const byName = new Map(STATES.map((s) => [s.name, s]));

/** stateDef describes s; undefined for UNSPECIFIED. */
export function stateDef(s: TaskState): StateDef | undefined {
  return byState.get(s);
}

/** stateByName finds a state by its URL name ("retry"). */
export function stateByName(name: string | null): StateDef | undefined {
  return name ? byName.get(name as StateName) : undefined;
}

/** countOf is q's count of tasks in state name. */
export function countOf(q: QueueInfo, name: StateName): number {
  return Number(q[name]);
}

/** totalOf is how many tasks q holds over every state. */
export function totalOf(q: QueueInfo): number {
  return STATES.reduce((n, s) => n + countOf(q, s.name), 0);
}

/** isTerminal reports whether a task in s is done (completed, archived, canceled). */
export function isTerminal(s: TaskState): boolean {
  return s === TaskState.COMPLETED || s === TaskState.ARCHIVED || s === TaskState.CANCELED;
}

/** Action is an operator action on tasks. */
export type Action = "run" | "cancel" | "archive" | "delete";

/** ACTIONS label each action, with the verb shown on buttons. */
export const ACTIONS: { action: Action; label: string; past: string; danger: boolean }[] = [
  { action: "run", label: "Run now", past: "made pending", danger: false },
  { action: "cancel", label: "Cancel", past: "canceled", danger: true },
  { action: "archive", label: "Archive", past: "archived", danger: true },
  { action: "delete", label: "Delete", past: "deleted", danger: true },
];

/**
 * allows reports whether an action applies to a task in state s
 * (CONTRACT.md, "Task listing and actions").
 */
export function allows(action: Action, s: TaskState): boolean {
  switch (action) {
    case "run":
      return [TaskState.SCHEDULED, TaskState.RETRY, TaskState.BLOCKED, TaskState.ARCHIVED, TaskState.CANCELED].includes(s);
    case "cancel":
      return !isTerminal(s);
    case "archive":
      return !isTerminal(s) && s !== TaskState.ACTIVE;
    case "delete":
      return s !== TaskState.ACTIVE;
  }
}
