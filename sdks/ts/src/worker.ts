import { create } from "@bufbuild/protobuf";
import { hostname } from "node:os";
import type { CronEntry } from "./gen/conveyor/v1/admin_pb.js";
import { createAdminClient } from "./admin.js";
import { declare, periodicEntry, retryable, type PeriodicJob } from "./periodic.js";
import { HelloSchema, WorkerMessageSchema, type ServerMessage, type Welcome } from "./gen/conveyor/v1/worker_pb.js";
import { reconnectDelay, DEFAULT_RECONNECT_BASE_MS, DEFAULT_RECONNECT_MAX_MS } from "./backoff.js";
import { ConveyorError, toConveyorError } from "./errors.js";
import { decodeJSON, type BatchHandler, type Handler, type JSONHandler } from "./handler.js";
import { toLog, type Log, type WorkerLogger } from "./logger.js";
import { Session, type SessionHost } from "./session.js";
import { SessionDialer, type SessionStream } from "./session_stream.js";
import { MAX_NAME_BYTES, validQueueName } from "./task_options.js";
import type { ConnectionOptions } from "./transport.js";
import { VERSION } from "./version.js";

/** DEFAULT_WORKER_CONCURRENCY is how many tasks a Worker runs at once unless set (as the Go SDK). */
export const DEFAULT_WORKER_CONCURRENCY = 10;
/** DEFAULT_DRAIN_TIMEOUT_MS is how long a stopping Worker lets running handlers finish (as the Go SDK). */
export const DEFAULT_DRAIN_TIMEOUT_MS = 30_000;
/** DEFAULT_PROGRESS_INTERVAL_MS is the shortest gap between two progress frames of one task. */
export const DEFAULT_PROGRESS_INTERVAL_MS = 1_000;
/** RELEASE_ID_ENV is the environment variable WorkerOptions.releaseId defaults to. */
export const RELEASE_ID_ENV = "CONVEYOR_RELEASE_ID";
/** HANDSHAKE_TIMEOUT_MS bounds the wait for Welcome after Hello. */
const HANDSHAKE_TIMEOUT_MS = 30_000;

/** WorkerOptions configure a Worker: the server, its queues and its limits. */
export interface WorkerOptions extends Omit<ConnectionOptions, "url"> {
  /**
   * The server's URL (see ConnectionOptions.url), which run() holds
   * sessions with. A Worker that only serves push requests
   * (createPushHandler) needs none; run() then throws.
   */
  url?: string;
  /** The queues to serve and their relative weights (integers > 0). Default `{ default: 1 }`. */
  queues?: Record<string, number>;
  /** How many tasks (a batch counts as one) run at once. Default 10. */
  concurrency?: number;
  /**
   * Informational labels shown in ListWorkers. The Worker adds `host` (the
   * host name) and `pid` (its process id) unless these name them; set one
   * to "" to send none.
   */
  labels?: Record<string, string>;
  /** The oldest server version (semver) this worker accepts; the server refuses the session if older. */
  minServerVersion?: string;
  /**
   * The worker's release (Hello.release_id), an opaque id such as a build
   * or commit. The server gives new work to the newest release it has
   * seen and can drain an old one (DrainRelease). Default: the
   * environment's CONVEYOR_RELEASE_ID, else none (unversioned, ranked
   * below every release); an empty string here means none, whatever the
   * environment says.
   */
  releaseId?: string;
  /**
   * How long a stopping worker lets running handlers finish before it
   * aborts their signals and reports them RELEASED. Default 30000.
   */
  drainTimeoutMs?: number;
  /** The shortest gap between two progress frames of one task; updates in between are coalesced. Default 1000. */
  progressIntervalMs?: number;
  /** The ceiling of the first reconnect delay. Default 500 (protocol §5.9). */
  reconnectBaseMs?: number;
  /** The cap of every reconnect delay. Default 30000 (protocol §5.9). */
  reconnectMaxMs?: number;
  /** Called with the session id on each Welcome (each session established). */
  onSession?: (sessionId: string) => void;
  /** Receives the worker's log records; silent unless set. */
  logger?: WorkerLogger;
}

/** RunOptions tune Worker.run. */
export interface RunOptions {
  /**
   * Install SIGTERM and SIGINT handlers that drain the worker (stop()),
   * removed when run ends. Default false: the process's signals are the
   * application's.
   */
  signals?: boolean;
}

/**
 * isFatal reports whether a session's end must not be retried (protocol
 * §4): a bad token, a token that does not allow the session, or a refused
 * Hello. Anything else, including a clean end, is reconnected.
 */
export function isFatal(err: unknown): boolean {
  return (
    err instanceof ConveyorError &&
    (err.code === "unauthenticated" || err.code === "permission_denied" || err.code === "invalid_argument")
  );
}

/**
 * Worker runs handlers for the tasks a Conveyor server dispatches to it
 * over one WorkerService.Session stream at a time, reconnecting with full
 * jitter when the stream ends (protocol §5).
 */
export class Worker implements SessionHost {
  readonly logger: Log;
  readonly progressIntervalMs: number;
  readonly drainTimeoutMs: number;
  private readonly opts: WorkerOptions;
  private readonly dialer: SessionDialer | undefined;
  private readonly queues: Record<string, number>;
  private readonly concurrency: number;
  private readonly releaseId: string;
  private readonly handlers = new Map<string, Handler>();
  private readonly batchHandlers = new Map<string, BatchHandler>();
  private readonly periodicJobs = new Map<string, CronEntry>();
  private running: Promise<void> | undefined;
  private stopping = false;
  /** stopCtl aborts on stop(); listeners are removed when done, so reconnects do not pile them up. */
  private readonly stopCtl = new AbortController();
  private orphans = 0;
  private orphanWake: (() => void) | undefined;

  constructor(opts: WorkerOptions) {
    this.opts = opts;
    this.queues = checkQueues(opts.queues ?? { default: 1 });
    this.concurrency = positiveInt("concurrency", opts.concurrency ?? DEFAULT_WORKER_CONCURRENCY);
    this.drainTimeoutMs = nonNegative("drainTimeoutMs", opts.drainTimeoutMs ?? DEFAULT_DRAIN_TIMEOUT_MS);
    this.progressIntervalMs = nonNegative("progressIntervalMs", opts.progressIntervalMs ?? DEFAULT_PROGRESS_INTERVAL_MS);
    this.logger = toLog(opts.logger);
    this.releaseId = opts.releaseId ?? process.env[RELEASE_ID_ENV] ?? "";
    // One dialer for every session: its HTTP/2 connection is reused, and
    // redialed when a session finds it gone (keepalive pings find a dead
    // one). Made now so a bad URL or protocol throws here, not in run().
    this.dialer = opts.url === undefined ? undefined : new SessionDialer({ ...opts, url: opts.url });
  }

  /**
   * handle registers the handler of a task type, replacing any earlier
   * one. Register handlers before run(): each session's Hello lists the
   * types that have one, and the server sends the Worker those only.
   */
  handle(type: string, handler: Handler): this {
    checkType(type);
    this.handlers.set(type, handler);
    return this;
  }

  /**
   * handleJSON registers a handler that gets the payload decoded as JSON.
   * A task whose content type is not JSON (application/json, a +json type,
   * or empty), or whose payload does not parse, fails SKIP_RETRY with a
   * message saying so: no retry would make it decode.
   */
  handleJSON<T = unknown>(type: string, handler: JSONHandler<T>): this {
    return this.handle(type, (ctx) => handler(decodeJSON(ctx.task) as T, ctx));
  }

  /**
   * handleBatch registers the batch handler of a task type, advertised in
   * Hello.batch_types so that the server delivers the type's fired groups
   * as one BatchDispatch. Unless the type also has a plain handler, it
   * serves a single delivery of the type too, as a batch of one.
   */
  handleBatch(type: string, handler: BatchHandler): this {
    checkType(type);
    this.batchHandlers.set(type, handler);
    return this;
  }

  /**
   * types are the task types this worker has a handler for, plain or
   * batch, sorted: Hello.types, so that the server dispatches it no other
   * type. (A Worker has no catch-all handler; one with no handler at all
   * declares none, which the server reads as every type.)
   */
  types(): string[] {
    return [...new Set([...this.handlers.keys(), ...this.batchHandlers.keys()])].sort();
  }

  /**
   * periodic declares the cron entry job.id: job's task enqueued on
   * job.spec's schedule (docs/workflows.md, Cron). run() creates the
   * entry, or updates it (its schedule only when the spec changed), before
   * its session opens; every replica may declare it, and it fires once per
   * tick. An entry the server refuses makes run() reject with its error.
   * Throws on an empty id or spec, a task the enqueue checks refuse, or an
   * id declared twice.
   */
  periodic(job: PeriodicJob): this {
    if (!job.id || !job.spec) throw new TypeError("conveyor: a periodic job needs an id and a spec");
    if (this.periodicJobs.has(job.id)) throw new TypeError(`conveyor: periodic job ${JSON.stringify(job.id)} is declared twice`);
    this.periodicJobs.set(job.id, periodicEntry(job));
    return this;
  }

  /**
   * declarePeriodic creates or updates the declared entries, again with
   * the reconnect backoff while the server cannot be reached; it rejects
   * on an error a retry cannot mend, and gives up quietly on stop().
   */
  private async declarePeriodic(): Promise<void> {
    if (this.periodicJobs.size === 0 || this.opts.url === undefined) return;
    const admin = createAdminClient({ ...this.opts, url: this.opts.url });
    for (let failures = 0; !this.stopping; failures++) {
      try {
        for (const entry of this.periodicJobs.values()) await declare(admin, entry);
        return;
      } catch (err) {
        if (!retryable(err)) throw toConveyorError(err);
        const wait = reconnectDelay(failures, this.opts.reconnectBaseMs ?? DEFAULT_RECONNECT_BASE_MS,
          this.opts.reconnectMaxMs ?? DEFAULT_RECONNECT_MAX_MS);
        this.logger.warn("declaring the periodic jobs failed; trying again", { err: (err as Error).message, delayMs: Math.round(wait) });
        await this.sleep(wait);
      }
    }
  }

  /** handlerFor is the plain handler of type. */
  handlerFor(type: string): Handler | undefined {
    return this.handlers.get(type);
  }

  /** batchHandlerFor is the batch handler of type. */
  batchHandlerFor(type: string): BatchHandler | undefined {
    return this.batchHandlers.get(type);
  }

  /**
   * run serves sessions until stop() (it then resolves, once drained) or a
   * fatal error (it then rejects with it: UnauthenticatedError,
   * PermissionDeniedError or InvalidArgumentError). It may be called once,
   * and throws a TypeError on a Worker made with no url.
   */
  run(opts: RunOptions = {}): Promise<void> {
    if (this.running) throw new Error("conveyor: Worker.run was already called");
    const dialer = this.dialer;
    if (!dialer) {
      throw new TypeError("conveyor: Worker.run needs WorkerOptions.url, the server to hold sessions with (this Worker has none: it serves push requests only)");
    }
    const onSignal = (): void => void this.stop();
    if (opts.signals) {
      process.on("SIGTERM", onSignal);
      process.on("SIGINT", onSignal);
    }
    this.running = this.declarePeriodic().then(() => this.loop(dialer)).finally(() => {
      dialer.close(); // run is over for good: no idle connection is left behind
      if (opts.signals) {
        process.off("SIGTERM", onSignal);
        process.off("SIGINT", onSignal);
      }
    });
    return this.running;
  }

  /**
   * stop drains the worker (protocol §5.10): no new task starts, running
   * ones get drainTimeoutMs to finish and are then RELEASED, and the stream
   * closes. It resolves when run() has ended (whatever its outcome).
   */
  async stop(): Promise<void> {
    if (!this.stopping) {
      this.stopping = true;
      this.stopCtl.abort();
    }
    if (this.running) await this.running.catch(() => {});
  }

  private async loop(dialer: SessionDialer): Promise<void> {
    let failures = 0;
    while (!this.stopping) {
      const slots = await this.awaitCapacity();
      if (slots === 0) break;
      const { established, error } = await this.serve(dialer, slots);
      if (established) failures = 0;
      if (this.stopping) break;
      if (error && isFatal(error)) throw error;
      const wait = reconnectDelay(failures++, this.opts.reconnectBaseMs ?? DEFAULT_RECONNECT_BASE_MS,
        this.opts.reconnectMaxMs ?? DEFAULT_RECONNECT_MAX_MS);
      this.logger.warn("worker session ended; reconnecting", { err: error?.message, delayMs: Math.round(wait) });
      await this.sleep(wait);
    }
  }

  /**
   * awaitCapacity is the concurrency the next Hello declares: the Worker's,
   * less handlers still running from lost sessions (orphans), waiting if
   * they hold every slot. 0 means the Worker is stopping.
   */
  private async awaitCapacity(): Promise<number> {
    while (!this.stopping && this.orphans >= this.concurrency) {
      let off = (): void => {};
      await new Promise<void>((resolve) => {
        this.orphanWake = resolve;
        off = this.onStop(resolve);
      });
      off();
    }
    return this.stopping ? 0 : this.concurrency - this.orphans;
  }

  /**
   * onStop calls fn once stop() is called (at once if it was); the
   * returned function removes it.
   */
  private onStop(fn: () => void): () => void {
    const signal = this.stopCtl.signal;
    if (signal.aborted) {
      fn();
      return () => {};
    }
    signal.addEventListener("abort", fn, { once: true });
    return () => signal.removeEventListener("abort", fn);
  }

  /**
   * sleep waits ms, or until stop(). Its timer keeps Node running: between
   * two sessions it may be all a running worker holds, and an unref'd one
   * would let the process exit instead of reconnecting. stop() clears it.
   */
  private sleep(ms: number): Promise<void> {
    if (this.stopCtl.signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      let off = (): void => {};
      const timer = setTimeout(() => {
        off();
        resolve();
      }, ms);
      off = this.onStop(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  /** orphaned counts handlers that outlive their session. */
  orphaned(n: number): void {
    this.orphans += n;
  }

  /** orphanReturned counts one orphan's return. */
  orphanReturned(): void {
    this.orphans--;
    this.orphanWake?.();
    this.orphanWake = undefined;
  }

  /** serve runs one session: Hello, Welcome, then frames until the stream ends. */
  private async serve(dialer: SessionDialer, slots: number): Promise<{ established: boolean; error: ConveyorError | Error | undefined }> {
    const abort = new AbortController();
    const stream = dialer.open(abort.signal);
    stream.push(create(WorkerMessageSchema, {
      frame: {
        case: "hello",
        value: create(HelloSchema, {
          queues: this.queues,
          concurrency: slots,
          labels: processLabels(this.opts.labels),
          sdkVersion: VERSION,
          minServerVersion: this.opts.minServerVersion ?? "",
          batchTypes: [...this.batchHandlers.keys()].sort(),
          types: this.types(),
          releaseId: this.releaseId,
          // Every session of this SDK asks before it runs an at-most-once
          // task (Dispatch.start_required), so the server may give it one.
          startAuthorization: true,
        }),
      },
    }));
    let session: Session | undefined;
    let endStream: () => void = () => {};
    const streamEnded = new Promise<void>((resolve) => {
      endStream = resolve;
    });
    // Until Welcome, a stop cuts the stream; after it, the session drains.
    const offStop = this.onStop(() => {
      if (!session) {
        abort.abort(new Error("conveyor: the worker stopped"));
        return;
      }
      const s = session;
      void s.drain(streamEnded).then(() => abort.abort(new Error("conveyor: the worker stopped")));
    });
    try {
      const first = await this.handshake(stream, abort);
      if (!first) return { established: false, error: undefined };
      const [welcome, rest] = first;
      session = new Session(this, stream, slots, welcome);
      this.logger.info("worker session established", {
        session: welcome.sessionId, serverVersion: welcome.serverVersion,
      });
      this.opts.onSession?.(welcome.sessionId);
      const s = session;
      for (let batch: ServerMessage[] | undefined = rest; batch; batch = await stream.read()) {
        for (const msg of batch) s.handle(msg);
      }
      return { established: true, error: undefined };
    } catch (err) {
      if (this.stopping && abort.signal.aborted) return { established: session !== undefined, error: undefined };
      return { established: session !== undefined, error: sessionError(err) };
    } finally {
      session?.end();
      endStream();
      stream.close();
      offStop();
      if (!abort.signal.aborted) abort.abort(new Error("conveyor: the session ended"));
    }
  }

  /**
   * handshake waits for Welcome, the server's first frame, and gives it
   * with the frames that came with it; undefined if the worker stopped.
   */
  private async handshake(
    stream: SessionStream,
    abort: AbortController,
  ): Promise<[Welcome, ServerMessage[]] | undefined> {
    const timer = setTimeout(
      () => abort.abort(new Error(`conveyor: no Welcome within ${HANDSHAKE_TIMEOUT_MS}ms of Hello`)),
      HANDSHAKE_TIMEOUT_MS,
    );
    timer.unref();
    try {
      const batch = await stream.read();
      if (!batch) throw new Error("conveyor: the server ended the stream before Welcome");
      const f = (batch[0] as ServerMessage).frame;
      if (f.case !== "welcome") {
        throw new Error(`conveyor: the server's first frame is ${f.case ?? "empty"}, not Welcome`);
      }
      return [f.value, batch.slice(1)];
    } catch (err) {
      if (this.stopping) return undefined;
      if (abort.signal.aborted && abort.signal.reason instanceof Error) throw abort.signal.reason;
      throw err;
    } finally {
      clearTimeout(timer);
    }
  }
}

/** sessionError types a stream's error (a plain Error of this SDK stays as is). */
function sessionError(err: unknown): Error {
  if (err instanceof Error && err.message.startsWith("conveyor: ")) return err;
  return toConveyorError(err);
}

function checkQueues(queues: Record<string, number>): Record<string, number> {
  const names = Object.keys(queues);
  if (names.length === 0) throw new TypeError("conveyor: a worker needs at least one queue");
  for (const name of names) {
    if (!validQueueName(name)) {
      throw new TypeError(
        `conveyor: queue name ${JSON.stringify(name)} must match ^[a-zA-Z0-9][a-zA-Z0-9-_.]*$ (at most ${MAX_NAME_BYTES} bytes)`,
      );
    }
    positiveInt(`weight of queue ${JSON.stringify(name)}`, queues[name] ?? 0);
  }
  return { ...queues };
}

function positiveInt(what: string, n: number): number {
  if (!Number.isInteger(n) || n <= 0 || n > 2 ** 31 - 1) {
    throw new TypeError(`conveyor: ${what} must be a positive integer, got ${n}`);
  }
  return n;
}

/** maxDelayMs is the longest delay a Node timer keeps (2^31-1 ms, about 24.8 days). */
const maxDelayMs = 2 ** 31 - 1;

function nonNegative(what: string, n: number): number {
  if (!Number.isFinite(n) || n < 0 || n > maxDelayMs) {
    throw new TypeError(`conveyor: ${what} must be between 0 and ${maxDelayMs} ms, got ${n}`);
  }
  return n;
}

function checkType(type: string): void {
  if (type === "") throw new TypeError("conveyor: a task type must not be empty");
}

/** processLabels is labels with the host name and process id added where they are not named, and empty ones dropped. */
function processLabels(labels: Record<string, string> = {}): Record<string, string> {
  const out: Record<string, string> = { host: hostname(), pid: String(process.pid), ...labels };
  for (const [k, v] of Object.entries(out)) if (v === "") delete out[k];
  return out;
}
