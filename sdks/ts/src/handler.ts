import type { TaskEnvelope } from "./gen/conveyor/v1/worker_pb.js";

/**
 * SkipRetry is the error a handler throws for a permanent failure: the task
 * is reported SKIP_RETRY and archived at once, with no retry, whatever
 * retries it has left. Any other thrown error is reported RETRY.
 */
export class SkipRetry extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "SkipRetry";
  }
}

/**
 * WorkerShutdownError is the reason a task's signal aborts with when a
 * stopping worker's drain timeout passes: the task is reported RELEASED
 * (given back with no retry counted, protocol §5.10), whatever the handler
 * then throws.
 */
export class WorkerShutdownError extends Error {
  constructor(message = "conveyor: the worker is shutting down") {
    super(message);
    this.name = "WorkerShutdownError";
  }
}

/**
 * TaskCanceledError is the reason a task's signal aborts with when the
 * server sends Cancel for it (an operator's CancelTask, or a lost lease).
 */
export class TaskCanceledError extends Error {
  constructor(message = "conveyor: the server canceled the task") {
    super(message);
    this.name = "TaskCanceledError";
  }
}

/**
 * TaskDeadlineError is the reason a task's signal aborts with when the
 * task's timeout or deadline passes; the task is reported RETRY.
 */
export class TaskDeadlineError extends Error {
  constructor(message = "conveyor: task deadline exceeded") {
    super(message);
    this.name = "TaskDeadlineError";
  }
}

/**
 * LeaseLapsedError is the reason a task's signal aborts with when its
 * lease lapsed on the worker's side: no heartbeat listing it could be
 * written within lease_ttl (the connection stalled), so the server has
 * reclaimed the task and may run it elsewhere. Its Result, RETRY, is the
 * late answer of a lapsed attempt, which the server drops.
 */
export class LeaseLapsedError extends Error {
  constructor(message = "conveyor: the task's lease lapsed: no heartbeat could be sent in time") {
    super(message);
    this.name = "LeaseLapsedError";
  }
}

/**
 * SessionLostError is the reason a task's signal aborts with when the
 * session that delivered it ends: the server has taken its lease back, so
 * nothing is reported for it.
 */
export class SessionLostError extends Error {
  constructor(message = "conveyor: the worker session ended") {
    super(message);
    this.name = "SessionLostError";
  }
}

/** TaskContext is what a handler gets beside its task. */
export interface TaskContext {
  /** The task as delivered: id, queue, type, payload, content type, metadata, options. */
  task: TaskEnvelope;
  /**
   * Aborts when the task must stop: its timeout or deadline passed
   * (reason TaskDeadlineError), the server canceled it (TaskCanceledError),
   * the worker's drain timeout passed (WorkerShutdownError) or the session
   * was lost (SessionLostError). Served by a push handler, it aborts at the
   * request's deadline (TaskDeadlineError) and when the server closes the
   * request (TaskCanceledError). Pass it on to whatever the handler awaits.
   */
  signal: AbortSignal;
  /**
   * progress records how far along the task is (percent 0..100 and a
   * message), visible through GetTask. Updates are coalesced: the latest
   * value per task, at most one frame per progress interval. Push requests
   * have no channel for it: there it checks percent and records nothing.
   */
  progress(percent: number, message?: string): void;
  /** attempt is the 1-based number of this run of the task (retried + 1). */
  attempt: number;
  /**
   * deadline is when the task's own timeout or deadline ends it (for a
   * push request, its PushRequest.deadline); undefined if none.
   */
  deadline: Date | undefined;
}

/**
 * HandlerResult is what a handler may return: bytes (Uint8Array), a
 * string (stored as UTF-8), undefined/null (no result) or any other
 * JSON-able value (stored as its JSON).
 */
export type HandlerResult = unknown;

/** Handler runs one task; its return or throw decides the task's outcome. */
export type Handler = (ctx: TaskContext) => HandlerResult | Promise<HandlerResult>;

/** JSONHandler runs one task whose payload was decoded as JSON. */
export type JSONHandler<T = unknown> = (value: T, ctx: TaskContext) => HandlerResult | Promise<HandlerResult>;

/** BatchContext is what a batch handler gets: the members of one fired group. */
export interface BatchContext {
  /** The members, in the order the server sent them (one, for a single delivery). */
  tasks: TaskEnvelope[];
  /** The aggregation group's key; empty for a single delivery served as a batch of one. */
  group: string;
  /** Aborts as TaskContext.signal does, for the whole batch. */
  signal: AbortSignal;
  /** deadline is the earliest of the members' own deadlines; undefined if none. */
  deadline: Date | undefined;
  /**
   * fail gives one member (by index or envelope) its own failure: SkipRetry
   * archives it, any other error retries it, whatever the batch returns.
   */
  fail(member: number | TaskEnvelope, err: unknown): void;
}

/**
 * BatchHandler runs the members of a fired group in one call. It may return
 * an array with one result per member (index for index), or nothing (every
 * member succeeds with no result). A throw fails every member not given its
 * own outcome with fail().
 */
export type BatchHandler = (batch: BatchContext) => unknown[] | void | Promise<unknown[] | void>;

const encoder = new TextEncoder();

/** encodeResult turns a handler's return into Result.result bytes. */
export function encodeResult(v: HandlerResult): Uint8Array {
  if (v === undefined || v === null) return new Uint8Array(0);
  if (v instanceof Uint8Array) return v;
  if (typeof v === "string") return encoder.encode(v);
  const json = JSON.stringify(v);
  return json === undefined ? new Uint8Array(0) : encoder.encode(json);
}

/**
 * isJSONContentType reports whether ct names JSON: application/json, a
 * +json type such as application/vnd.acme+json, or empty (the protocol's
 * default content type is JSON).
 */
export function isJSONContentType(ct: string): boolean {
  const mt = (ct.split(";")[0] ?? "").trim().toLowerCase();
  if (mt === "") return true;
  return mt === "application/json" || (mt.startsWith("application/") && mt.endsWith("+json"));
}

const decoder = new TextDecoder("utf-8", { fatal: true });

/**
 * decodeJSON decodes a task's payload as JSON. A content type other than
 * JSON, or a payload that does not parse, throws SkipRetry (protocol §3:
 * refuse, never guess; no retry would make it decode), as the Go SDK's
 * HandleJSON does.
 */
export function decodeJSON(task: TaskEnvelope): unknown {
  if (!isJSONContentType(task.contentType)) {
    throw new SkipRetry(
      `conveyor: task ${task.id} (${task.type}) has content type ${JSON.stringify(task.contentType)}; this handler decodes only application/json`,
    );
  }
  try {
    return JSON.parse(decoder.decode(task.payload));
  } catch (err) {
    throw new SkipRetry(
      `conveyor: decode the JSON payload of task ${task.id} (${task.type}): ${errorMessage(err)}`,
      { cause: err },
    );
  }
}

/** errorMessage is the text of whatever was thrown. */
export function errorMessage(err: unknown): string {
  if (err instanceof Error) return err.message || err.name;
  if (typeof err === "string") return err;
  try {
    return String(err);
  } catch {
    return "unknown error";
  }
}
