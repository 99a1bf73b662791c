import { create } from "@bufbuild/protobuf";
import type { Timestamp } from "@bufbuild/protobuf/wkt";
import type { BatchDispatch, Dispatch, ServerMessage, StartDecision, TaskEnvelope, Welcome } from "./gen/conveyor/v1/worker_pb.js";
import {
  HeartbeatSchema,
  ProgressSchema,
  ResultSchema,
  BatchResultSchema,
  StartSchema,
  TaskOutcome,
  WorkerMessageSchema,
  type Heartbeat,
  type Result,
  type WorkerMessage,
} from "./gen/conveyor/v1/worker_pb.js";
import { Execution, durationMs, earliest, ownBound } from "./execution.js";
import { ServerClock } from "./server_clock.js";
import {
  LeaseLapsedError,
  SessionLostError,
  TaskCanceledError,
  TaskDeadlineError,
  WorkerShutdownError,
} from "./handler.js";
import { invoke, type HandlerSet } from "./invoke.js";
import type { Log } from "./logger.js";
import type { Outbox } from "./outbox.js";

/** maxHeartbeatIDs bounds the ids (task and attempt) in one Heartbeat frame. */
const maxHeartbeatIDs = 100_000;
/** maxTimerMs is the longest delay setTimeout keeps (2^31-1 ms, about 24.8 days). */
const maxTimerMs = 2 ** 31 - 1;
/** drainUnwindMs bounds the wait for aborted handlers to return in a drain. */
const drainUnwindMs = 5_000;
/** closeWaitMs bounds the wait for the server to end the stream after the close. */
const closeWaitMs = 5_000;

/** SessionHost is what a session needs of its Worker. */
export interface SessionHost extends HandlerSet {
  readonly logger: Log;
  readonly progressIntervalMs: number;
  readonly drainTimeoutMs: number;
  /** orphaned is told that n handlers outlive their session. */
  orphaned(n: number): void;
  /** orphanReturned is told that one such handler returned. */
  orphanReturned(): void;
}

/**
 * Session serves one established WorkerService.Session stream, from its
 * Welcome to its end. Each Dispatch becomes an Execution that waits for
 * one of the session's slots (as many as its Hello declared), runs its
 * handler and queues exactly one Result. Heartbeats, every
 * Welcome.heartbeat_interval, list every delivery held (running, waiting
 * for a slot, asking to start, or parked by a drain) by task id and
 * attempt id. When the stream ends, every execution still held is aborted
 * with SessionLostError and its result dropped: the server has released
 * its lease.
 *
 * An at-most-once delivery (Dispatch.start_required) takes its slot like
 * any other, but then sends Start and waits for the StartDecision before
 * its handler runs: authorized, it runs as usual; refused, it is dropped
 * with no Result. Until the decision it is unstarted for every other
 * purpose: a Cancel, its own bound or the end of a drain's timeout
 * answers it RELEASED, a lost stream drops it, and one a drain parks
 * never asks at all.
 */
export class Session {
  readonly id: string;
  private readonly live = new Set<Execution>();
  private readonly byTask = new Map<string, Execution>();
  private readonly waiting: Execution[] = [];
  /** asking holds the deliveries that sent Start and wait for its answer, by attempt id. */
  private readonly asking = new Map<string, Execution>();
  /** running counts the slots held: deliveries asking to start or running. */
  private running = 0;
  private draining = false;
  private ended = false;
  private idle: (() => void) | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  private readonly leaseTtl: number;
  private readonly clock: ServerClock;

  constructor(
    private readonly host: SessionHost,
    private readonly outbox: Outbox,
    private readonly slots: number,
    welcome: Welcome,
  ) {
    this.id = welcome.sessionId;
    let leaseTtl = durationMs(welcome.leaseTtl);
    if (leaseTtl <= 0) leaseTtl = 60_000; // the protocol's default
    this.leaseTtl = leaseTtl;
    this.clock = new ServerClock(leaseTtl);
    let interval = durationMs(welcome.heartbeatInterval);
    if (interval <= 0) interval = leaseTtl / 3;
    this.heartbeat = setInterval(() => {
      this.stopLapsed();
      this.sendHeartbeats();
    }, interval);
    this.heartbeat.unref();
  }

  /** handle acts on one server frame. */
  handle(msg: ServerMessage): void {
    const f = msg.frame;
    switch (f.case) {
      case "dispatch":
        this.dispatch(f.value);
        break;
      case "batchDispatch":
        this.dispatchBatch(f.value);
        break;
      case "cancel":
        this.cancel(f.value.taskId);
        break;
      case "startDecision":
        this.decide(f.value);
        break;
      case "ping":
        // A liveness probe: tolerated, never answered (§5.7).
        break;
      default:
      // A repeated Welcome, an empty frame or one this SDK does not know: ignored.
    }
  }

  private dispatch(d: Dispatch): void {
    if (!d.task) return;
    const ex = this.execution([d.task], [d.attemptId || d.task.attemptId], false, "", d.deadline);
    ex.startRequired = d.startRequired;
    this.accept(ex);
  }

  private dispatchBatch(b: BatchDispatch): void {
    if (b.tasks.length === 0) return;
    this.accept(this.execution(b.tasks, b.tasks.map((t) => t.attemptId), true, b.group, b.deadline));
  }

  /** execution makes the Execution of a frame carrying deadline, its bound reckoned by the server's clock (ServerClock). */
  private execution(tasks: TaskEnvelope[], attempts: string[], batch: boolean, group: string, deadline: Timestamp | undefined): Execution {
    const received = Date.now();
    const serverAt = this.clock.at(received, deadline, tasks);
    if (tasks.length === 1) {
      // A delivery of one task has no bystander (spareBystander): no member bounds to keep.
      return new Execution(tasks, attempts, batch, group, ownBound(tasks[0]!, received, serverAt), received);
    }
    const bounds = tasks.map((t) => ownBound(t, received, serverAt));
    const ex = new Execution(tasks, attempts, batch, group, earliest(bounds), received);
    ex.memberBounds = bounds;
    return ex;
  }

  /** accept holds a new delivery: it starts now, waits for a slot, or is parked by a drain. */
  private accept(ex: Execution): void {
    if (this.ended) return;
    ex.leaseExpiry = ex.received + this.leaseTtl;
    this.live.add(ex);
    for (const t of ex.tasks) this.byTask.set(t.id, ex);
    if (ex.bound !== undefined) this.armBound(ex, ex.bound);
    if (this.draining) return; // parked: listed in heartbeats, never started (§5.10)
    if (this.running < this.slots) this.start(ex);
    else this.waiting.push(ex);
  }

  /**
   * armBound calls boundPassed at bound, in steps of at most maxTimerMs
   * (a longer setTimeout would fire at once).
   */
  private armBound(ex: Execution, bound: number): void {
    const wait = Math.max(0, bound - Date.now());
    ex.boundTimer = setTimeout(
      () => (wait > maxTimerMs ? this.armBound(ex, bound) : this.boundPassed(ex)),
      Math.min(wait, maxTimerMs),
    );
    ex.boundTimer.unref();
  }

  /**
   * boundPassed ends a delivery at its own timeout or deadline: a running
   * handler is aborted (RETRY); one that never started is given back
   * (RELEASED), since it never ran.
   */
  private boundPassed(ex: Execution): void {
    ex.boundTimer = undefined;
    if (ex.settled) return;
    if (ex.started) {
      ex.abort(new TaskDeadlineError());
      return;
    }
    this.unwait(ex);
    if (ex.bound !== undefined && ex.bound <= ex.received) {
      // Past its deadline on arrival by this worker's reckoning, though
      // not by the server's (which archives such a task instead of
      // sending it): given back, it would come straight back. Failed, it
      // is backed off, and archived once the server's clock passes too.
      this.settle(ex, ex.all(TaskOutcome.RETRY,
        "not started: its deadline had passed by this worker's clock when it arrived (is the worker's clock ahead of the server's?)"));
      return;
    }
    this.settle(ex, ex.all(TaskOutcome.RELEASED, "released unstarted: its timeout or deadline passed while it waited to start"));
  }

  private cancel(taskId: string): void {
    const ex = this.byTask.get(taskId);
    if (!ex || ex.settled) return;
    (ex.canceled ??= new Set()).add(taskId);
    if (ex.started) {
      ex.abort(new TaskCanceledError());
      return;
    }
    this.unwait(ex);
    this.settle(ex, ex.all(TaskOutcome.RELEASED, ex.asking ? "canceled before its start was authorized" : "canceled before it started"));
  }

  /**
   * stopLapsed stops the deliveries whose lease lapsed as reckoned here:
   * no heartbeat listing them could be written in time (a stalled
   * connection), so the server has reclaimed them and may run them
   * elsewhere. A running handler is aborted with LeaseLapsedError; one
   * not started is never started (its RELEASED answer is late, and
   * dropped, like the RETRY of a running one).
   */
  private stopLapsed(): void {
    const now = Date.now();
    for (const ex of this.live) {
      if (ex.settled || ex.abortReason || ex.leaseExpiry >= now) continue;
      this.host.logger.warn("task lease lapsed: no heartbeat could be sent in time", {
        tasks: ex.tasks.map((t) => t.id),
      });
      if (ex.started) {
        ex.abort(new LeaseLapsedError());
        continue;
      }
      this.unwait(ex);
      this.settle(ex, ex.all(TaskOutcome.RELEASED, "its lease lapsed before it started: no heartbeat could be sent in time"));
    }
  }

  private unwait(ex: Execution): void {
    const i = this.waiting.indexOf(ex);
    if (i >= 0) this.waiting.splice(i, 1);
  }

  /**
   * start gives ex a slot and runs it there, or, for an at-most-once
   * delivery, asks the server first: the slot is held while it waits, so
   * that an authorized start runs at once.
   */
  private start(ex: Execution): void {
    ex.slot = true;
    this.running++;
    if (ex.startRequired) this.ask(ex);
    else this.run(ex);
  }

  /** ask sends Start for ex's attempt; decide acts on the answer. */
  private ask(ex: Execution): void {
    const attempt = ex.attempts[0] ?? "";
    ex.asking = true;
    this.asking.set(attempt, ex);
    this.send({ case: "start", value: create(StartSchema, { attemptId: attempt }) });
  }

  /**
   * decide acts on a StartDecision: authorized, the handler runs (even in
   * a drain: the server has committed the start, and a task it authorized
   * that ends with no Result is archived, not run again); refused, the
   * delivery is dropped with no Result and no longer listed in heartbeats.
   * A decision for an attempt this session is not asking about (answered
   * already, canceled, or never held) is ignored.
   */
  private decide(d: StartDecision): void {
    const ex = this.asking.get(d.attemptId);
    if (!ex) {
      this.host.logger.debug("start decision for an attempt this worker is not asking about: ignored", {
        attempt: d.attemptId, authorized: d.authorized,
      });
      return;
    }
    this.asking.delete(d.attemptId);
    ex.asking = false;
    const task = ex.tasks[0];
    if (!d.authorized) {
      this.host.logger.warn("start refused: the task is not run", {
        task: task?.id, type: task?.type, attempt: d.attemptId, reason: d.reason,
      });
      this.settle(ex, []);
      return;
    }
    this.run(ex);
  }

  /** run calls ex's handler (invoke, shared with push requests) in its slot and settles it with its results. */
  private run(ex: Execution): void {
    ex.started = true;
    invoke(this.host, ex, this.host.logger, (percent, message) => this.progress(ex, percent, message)).then(
      (rs) => this.settle(ex, rs),
      (err: unknown) => this.settle(ex, ex.resultsFor(false, err)),
    );
  }

  /** settle reports ex's results (unless its session is gone) and frees its slot. */
  private settle(ex: Execution, rs: Result[]): void {
    if (ex.settled) return;
    ex.settled = true;
    ex.clearTimers();
    this.live.delete(ex);
    if (ex.asking) {
      ex.asking = false;
      this.asking.delete(ex.attempts[0] ?? "");
    }
    for (const t of ex.tasks) if (this.byTask.get(t.id) === ex) this.byTask.delete(t.id);
    if (this.ended) {
      if (ex.started) this.host.orphanReturned();
      return; // the server has taken the lease back: nothing to report
    }
    this.flushProgress(ex);
    if (ex.batch) {
      this.send({ case: "batchResult", value: create(BatchResultSchema, { results: rs }) });
    } else if (rs[0]) {
      this.send({ case: "result", value: create(ResultSchema, rs[0]) });
    }
    if (!ex.slot) return;
    ex.slot = false;
    this.running--;
    if (!this.draining) {
      const next = this.waiting.shift();
      if (next) this.start(next);
    } else if (this.running === 0 && this.idle) {
      this.idle();
      this.idle = undefined;
    }
  }

  /** progress coalesces a handler's progress: the latest value, at most one frame per interval. */
  private progress(ex: Execution, percent: number, message: string): void {
    if (ex.settled || this.ended) return;
    const p = ex.progressState();
    p.pending = { percent: Math.round(percent), message };
    if (p.timer) return;
    const wait = p.lastSent + this.host.progressIntervalMs - Date.now();
    if (wait <= 0) {
      this.flushProgress(ex);
      return;
    }
    p.timer = setTimeout(() => {
      p.timer = undefined;
      if (!ex.settled && !this.ended) this.flushProgress(ex);
    }, wait);
    p.timer.unref();
  }

  private flushProgress(ex: Execution): void {
    const p = ex.progress;
    const pending = p?.pending;
    const task = ex.tasks[0];
    if (!p || !pending || !task) return;
    p.pending = undefined;
    p.lastSent = Date.now();
    this.send({
      case: "progress",
      value: create(ProgressSchema, { taskId: task.id, percent: pending.percent, message: pending.message }),
    });
  }

  /**
   * sendHeartbeats lists every delivery held, in frames of at most
   * maxHeartbeatIDs ids. Once the last is written, the leases of those
   * listed count from when they were sent.
   */
  private sendHeartbeats(): void {
    if (this.ended) return;
    const expiry = Date.now() + this.leaseTtl;
    const listed = [...this.live];
    const frames: Heartbeat[] = [create(HeartbeatSchema, {})];
    for (const ex of listed) {
      ex.tasks.forEach((t, i) => {
        const attempt = ex.attempts[i] ?? "";
        const n = 1 + (attempt ? 1 : 0);
        let hb = frames[frames.length - 1] as Heartbeat;
        if (hb.activeTaskIds.length + hb.activeAttemptIds.length + n > maxHeartbeatIDs) {
          hb = create(HeartbeatSchema, {});
          frames.push(hb);
        }
        hb.activeTaskIds.push(t.id);
        if (attempt) hb.activeAttemptIds.push(attempt);
      });
    }
    const renewed = (): void => {
      for (const ex of listed) if (ex.leaseExpiry < expiry) ex.leaseExpiry = expiry;
    };
    frames.forEach((hb, i) => this.send({ case: "heartbeat", value: hb }, i === frames.length - 1 ? renewed : undefined));
  }

  private send(frame: WorkerMessage["frame"], written?: () => void): void {
    this.outbox.push(create(WorkerMessageSchema, { frame }), written);
  }

  /**
   * end marks the stream gone: every held execution is aborted with
   * SessionLostError and its result will be dropped; the running ones
   * become orphans of the Worker until they return.
   */
  end(): void {
    if (this.ended) return;
    this.ended = true;
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.heartbeat = undefined;
    this.waiting.length = 0;
    this.asking.clear();
    let orphans = 0;
    for (const ex of this.live) if (ex.started) orphans++;
    if (orphans > 0) this.host.orphaned(orphans);
    for (const ex of this.live) {
      ex.clearTimers();
      ex.abort(new SessionLostError());
      if (!ex.started) ex.settled = true;
    }
    if (this.idle) this.idle();
    this.idle = undefined;
  }

  /**
   * drain stops new starts (a late or waiting dispatch stays listed in
   * heartbeats but is not started, nor asked about if at-most-once),
   * gives the running handlers and the pending start decisions
   * drainTimeoutMs to finish, aborts the handlers still running with
   * WorkerShutdownError and answers the deliveries still asking (both
   * reported RELEASED; a decision for those that comes later is ignored),
   * waits, bounded, for the handlers to return, then closes the request
   * side and waits, bounded, for the server to end the stream.
   * streamEnded resolves when the stream has ended.
   */
  async drain(streamEnded: Promise<void>): Promise<void> {
    this.draining = true;
    this.waiting.length = 0; // still in this.live: listed, never started
    this.host.logger.info("worker draining", { session: this.id, running: this.running });
    if (!(await this.untilIdle(this.host.drainTimeoutMs, streamEnded))) {
      let n = 0;
      for (const ex of [...this.live]) {
        if (ex.asking) {
          this.settle(ex, ex.all(TaskOutcome.RELEASED, "released by a worker shutting down before its start was authorized"));
        } else if (ex.started && !ex.settled) {
          ex.abort(new WorkerShutdownError());
          n++;
        }
      }
      this.host.logger.info("drain timeout over: releasing the tasks still running", { count: n });
      await this.untilIdle(drainUnwindMs, streamEnded);
    }
    if (this.ended) return;
    this.outbox.close();
    await within(streamEnded, closeWaitMs);
  }

  /** untilIdle resolves true once no handler runs, false after ms or the stream's end. */
  private untilIdle(ms: number, streamEnded: Promise<void>): Promise<boolean> {
    if (this.running === 0 || this.ended) return Promise.resolve(this.running === 0);
    const idle = new Promise<boolean>((resolve) => {
      this.idle = () => resolve(true);
    });
    return Promise.race([idle, streamEnded.then(() => false), delay(ms).then(() => false)]);
  }
}

/** delay resolves after ms, on an unref'd timer. */
export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}

/** within waits for p, at most ms. */
function within(p: Promise<void>, ms: number): Promise<void> {
  return Promise.race([p, delay(ms)]);
}
