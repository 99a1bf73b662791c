import { create } from "@bufbuild/protobuf";
import type { Duration, Timestamp } from "@bufbuild/protobuf/wkt";
import type { TaskEnvelope } from "./gen/conveyor/v1/worker_pb.js";
import { ResultSchema, TaskOutcome, type Result } from "./gen/conveyor/v1/worker_pb.js";
import {
  SkipRetry,
  TaskCanceledError,
  TaskDeadlineError,
  WorkerShutdownError,
  encodeResult,
  errorMessage,
} from "./handler.js";

/** timestampMs converts a protobuf Timestamp to milliseconds since the epoch. */
export function timestampMs(ts: Timestamp | undefined): number | undefined {
  if (!ts || (ts.seconds === 0n && ts.nanos === 0)) return undefined;
  return Number(ts.seconds) * 1000 + Math.floor(ts.nanos / 1e6);
}

/** durationMs converts a protobuf Duration to milliseconds (0 if unset). */
export function durationMs(d: Duration | undefined): number {
  if (!d) return 0;
  return Number(d.seconds) * 1000 + Math.floor(d.nanos / 1e6);
}

/**
 * ownBound is when task's own timeout or deadline ends a run of it that
 * began at received (ms, this worker's clock), the server's clock then
 * reading serverAt: the earlier of options.deadline, moved onto this
 * worker's clock, and received + options.timeout; undefined if it has
 * neither. Dispatch.deadline is not used: its lease part moves with every
 * heartbeat, so a long task that heartbeats must not be stopped when the
 * first lease expiry passes.
 */
export function ownBound(task: TaskEnvelope, received: number, serverAt = received): number | undefined {
  const deadline = timestampMs(task.options?.deadline);
  let bound = deadline === undefined ? undefined : received + (deadline - serverAt);
  const timeout = durationMs(task.options?.timeout);
  if (timeout > 0) {
    const t = received + timeout;
    if (bound === undefined || t < bound) bound = t;
  }
  return bound;
}

/** earliest is the earliest of bounds; undefined if none is set. */
export function earliest(bounds: (number | undefined)[]): number | undefined {
  let bound: number | undefined;
  for (const b of bounds) if (b !== undefined && (bound === undefined || b < bound)) bound = b;
  return bound;
}

/** Progress is one task's pending progress report and its coalescing state. */
interface ProgressState {
  pending: { percent: number; message: string } | undefined;
  lastSent: number;
  timer: NodeJS.Timeout | undefined;
}

/**
 * Execution is one delivery a session holds: a Dispatch (one task) or a
 * BatchDispatch (its members), from its arrival to its Result. It holds a
 * concurrency slot only while it asks to start or runs.
 */
export class Execution {
  readonly tasks: TaskEnvelope[];
  readonly attempts: string[];
  readonly batch: boolean;
  readonly group: string;
  /** received is when the delivery arrived (ms since the epoch, this worker's clock). */
  readonly received: number;
  /** ctl backs signal, made on the first read: most handlers never read it. */
  private ctl: AbortController | undefined;
  /** abortReason is why the delivery was stopped; undefined until it is. */
  abortReason: Error | undefined;
  /** bound is the earliest member's own bound (ms since the epoch). */
  readonly bound: number | undefined;
  /**
   * startRequired: an at-most-once delivery (Dispatch.start_required),
   * whose handler may run only after the server authorized its start.
   */
  startRequired = false;
  /** slot is set while the delivery holds one of its session's slots (asking to start, or running). */
  slot = false;
  /** asking is set from its Start until the StartDecision answering it. */
  asking = false;
  /** started is set once its handler was called. */
  started = false;
  settled = false;
  boundTimer: NodeJS.Timeout | undefined;
  /**
   * leaseExpiry is when the delivery's lease lapses as reckoned here (ms
   * since the epoch): lease_ttl after it arrived, moved on by every
   * heartbeat listing it once that heartbeat has been written.
   */
  leaseExpiry = 0;
  /**
   * memberBounds are the members' own bounds (ownBound) of a delivery of
   * several tasks, whose bound is their earliest; a member whose own bound
   * is later did not reach it when the delivery did.
   */
  memberBounds: (number | undefined)[] | undefined;
  /** canceled holds the task ids a server Cancel named; made on the first. */
  canceled: Set<string> | undefined;
  /** failed holds the outcomes a batch handler gave members with fail(); made on the first. */
  failed: Map<number, unknown> | undefined;
  /** progress is made on the handler's first progress call. */
  progress: ProgressState | undefined;

  /**
   * bound is when the delivery must stop (the earliest of its members'
   * own bounds, or a PushRequest.deadline, which already counts the
   * task's timeout and deadline); undefined for never. received is when
   * it arrived.
   */
  constructor(
    tasks: TaskEnvelope[],
    attempts: string[],
    batch: boolean,
    group: string,
    bound: number | undefined,
    received = Date.now(),
  ) {
    this.tasks = tasks;
    this.attempts = attempts;
    this.batch = batch;
    this.group = group;
    this.bound = bound;
    this.received = received;
  }

  /**
   * signal aborts when the delivery must stop, with abortReason. It is
   * made on its first read, already aborted if abort came first: one
   * AbortController a task cost a few percent of a worker's time (W3).
   */
  get signal(): AbortSignal {
    if (!this.ctl) {
      this.ctl = new AbortController();
      if (this.abortReason) this.ctl.abort(this.abortReason);
    }
    return this.ctl.signal;
  }

  /** abort stops the handler with reason, if it has not been stopped yet. */
  abort(reason: Error): void {
    if (this.abortReason) return;
    this.abortReason = reason;
    this.ctl?.abort(reason);
  }

  /** fail records member i's own failure (BatchContext.fail). */
  fail(i: number, err: unknown): void {
    (this.failed ??= new Map()).set(i, err);
  }

  /** progressState is the delivery's progress coalescing state, made on first use. */
  progressState(): ProgressState {
    return (this.progress ??= { pending: undefined, lastSent: 0, timer: undefined });
  }

  /** clearTimers stops the execution's timers. */
  clearTimers(): void {
    if (this.boundTimer) clearTimeout(this.boundTimer);
    this.boundTimer = undefined;
    const p = this.progress;
    if (p?.timer) {
      clearTimeout(p.timer);
      p.timer = undefined;
    }
  }

  /** all gives every member the same outcome. */
  all(outcome: TaskOutcome, errorMsg: string): Result[] {
    return this.tasks.map((t, i) => this.result(i, outcome, errorMsg));
  }

  /** result makes member i's Result, echoing its attempt id. */
  result(i: number, outcome: TaskOutcome, errorMsg: string, bytes?: Uint8Array): Result {
    return create(ResultSchema, {
      taskId: this.tasks[i]?.id ?? "",
      attemptId: this.attempts[i] ?? "",
      outcome,
      errorMsg,
      result: bytes ?? new Uint8Array(0),
    });
  }

  /**
   * resultsFor maps a single handler's return (ok) or throw to the
   * Result(s); for a batch handler's return (perMember: a batch, or a
   * single delivery served as a batch of one), every member without an
   * outcome of its own gets its element of the returned array.
   */
  resultsFor(ok: boolean, value: unknown, perMember = this.batch): Result[] {
    if (!perMember) return [this.outcome(0, ok, value, ok ? value : undefined)];
    const values = ok && Array.isArray(value) ? value : [];
    return this.tasks.map((_, i) => {
      if (this.failed?.has(i)) return this.spareBystander(i, this.outcome(i, false, this.failed.get(i), undefined));
      return this.spareBystander(i, this.outcome(i, ok, value, values[i]));
    });
  }

  /**
   * spareBystander turns the RETRY of a batch member stopped only because
   * its batch was stopped for another member into RELEASED: by a server
   * Cancel that did not name it, or at another member's timeout or
   * deadline while its own had not passed. That is no failure of its own
   * (as a drain's abandonment is none, protocol §5.10); RETRY would spend
   * its retries and hold it back by its backoff. The Go SDK's rule.
   */
  private spareBystander(i: number, r: Result): Result {
    const reason = this.abortReason;
    if (r.outcome !== TaskOutcome.RETRY || this.tasks.length < 2 || !reason) return r;
    let why: string | undefined;
    if (reason instanceof TaskCanceledError && !this.canceled?.has(this.tasks[i]?.id ?? "")) {
      why = "the server canceled another member of its batch";
    } else if (reason instanceof TaskDeadlineError && !this.ownBoundPassed(i)) {
      why = "another member of its batch reached its timeout or deadline";
    }
    if (why === undefined) return r;
    r.outcome = TaskOutcome.RELEASED;
    r.errorMsg = `released: ${why}: ${r.errorMsg}`;
    return r;
  }

  /** ownBoundPassed reports whether member i's own bound is the one the delivery reached. */
  private ownBoundPassed(i: number): boolean {
    const own = this.memberBounds?.[i];
    return own !== undefined && this.bound !== undefined && own <= this.bound;
  }

  /** outcome maps one member's end (protocol §5.8, §5.10). */
  private outcome(i: number, ok: boolean, err: unknown, value: unknown): Result {
    if (ok) return this.result(i, TaskOutcome.SUCCESS, "", encodeResult(value));
    const reason = this.abortReason;
    const msg = errorMessage(err);
    if (reason instanceof WorkerShutdownError) {
      // The drain abandoned the task: whatever the handler made of its
      // aborted signal, this is no failure of the task.
      return this.result(i, TaskOutcome.RELEASED, `released by a worker shutting down: ${msg}`);
    }
    if (err instanceof SkipRetry) return this.result(i, TaskOutcome.SKIP_RETRY, msg);
    if (reason instanceof TaskDeadlineError) {
      const m = err === reason ? "task deadline exceeded" : `task deadline exceeded: ${msg}`;
      return this.result(i, TaskOutcome.RETRY, m);
    }
    return this.result(i, TaskOutcome.RETRY, msg);
  }

  /** memberIndex finds a member by index or envelope; -1 if not one. */
  memberIndex(member: number | TaskEnvelope): number {
    if (typeof member === "number") return member >= 0 && member < this.tasks.length ? member : -1;
    return this.tasks.indexOf(member);
  }
}
