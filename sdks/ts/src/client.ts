import { Code, createClient, type Interceptor } from "@connectrpc/connect";
import type { Http2SessionManager } from "@connectrpc/connect-node";
import { DEFAULT_ENQUEUE_IN_FLIGHT, EnqueueBatcher, itemError, type TaskClient, unaryEnqueue, unbrief } from "./batcher.js";
import { abortError, callError, type ConveyorError, errorFor, toConveyorError } from "./errors.js";
import { TaskService } from "./gen/conveyor/v1/service_pb.js";
import type { EnqueueRequest, TaskInfo } from "./gen/conveyor/v1/task_pb.js";
import { JSON_CONTENT_TYPE, jsonPayload } from "./json.js";
import { type EnqueueItem, type EnqueueOptions, enqueueRequest, MAX_BATCH_ITEMS } from "./task_options.js";
import { type ConnectionOptions, createSessionManager, createTransport } from "./transport.js";

/**
 * Logger receives the SDK's log lines. Every method is optional; the
 * default logger is silent, as a library must not write to the console.
 */
export interface Logger {
  debug?(msg: string, attrs?: Record<string, unknown>): void;
  info?(msg: string, attrs?: Record<string, unknown>): void;
  warn?(msg: string, attrs?: Record<string, unknown>): void;
  error?(msg: string, attrs?: Record<string, unknown>): void;
}

/** ClientOptions say how a Client reaches its server and how it enqueues. */
export interface ClientOptions extends ConnectionOptions {
  /**
   * Whether concurrent enqueue calls share EnqueueBatch RPCs (see Client).
   * Default true: under load a producer then needs a fraction of the round
   * trips and commits; an idle producer waits for nothing either way.
   */
  batching?: boolean;
  /**
   * How many enqueue RPCs may be out before further enqueue calls gather
   * into a shared batch. Default 2 (DEFAULT_ENQUEUE_IN_FLIGHT). Ignored
   * when batching is off.
   */
  enqueueInFlight?: number;
  /** Where the Client logs; silent unless set. */
  logger?: Logger;
}

/** CallOptions are per-call settings. */
export interface CallOptions {
  /**
   * Aborts the call: it then fails with CanceledError, or with
   * DeadlineExceededError when the signal is an AbortSignal.timeout. An
   * enqueue aborted before its RPC leaves is never sent; one aborted after
   * may or may not be stored (enqueue with a taskId to retry safely).
   */
  signal?: AbortSignal;
}

/** EnqueueCallOptions are a task's options and the call's. */
export type EnqueueCallOptions = EnqueueOptions & CallOptions;

/**
 * BatchItemResult is the outcome of one item of enqueueBatch: the committed
 * task, or the error typed by the code the server gave for the item
 * (AlreadyExistsError for a repeated taskId or a held uniqueKey,
 * InvalidArgumentError for a bad item, ResourceExhaustedError for a full
 * queue), or an InvalidArgumentError the Client found before sending.
 */
export type BatchItemResult = { task: TaskInfo; error?: undefined } | { task?: undefined; error: ConveyorError };

/** ClientStats count what a Client sent, for tests and monitoring. */
export interface ClientStats {
  /** The enqueue and enqueueJSON calls that reached the sending stage. */
  enqueueCalls: number;
  /** The RPCs those calls took (Enqueue and gathered EnqueueBatch). */
  enqueueRpcs: number;
}

/**
 * Client enqueues tasks and looks them up through the server's TaskService.
 * Create one per server and reuse it: it holds the HTTP/2 connection, and
 * concurrent calls share it.
 *
 * Errors are ConveyorErrors of the class of their code (InvalidArgumentError,
 * AlreadyExistsError, NotFoundError, UnauthenticatedError, ...). A task that
 * breaks a bound of the protocol fails with InvalidArgumentError before any
 * RPC, its message naming the field.
 *
 * Unless `batching: false`, concurrent enqueue calls share RPCs: while fewer
 * than enqueueInFlight RPCs are out, a call goes out at once as a plain
 * Enqueue; otherwise it joins the gathering batch, which leaves as one
 * EnqueueBatch when an RPC returns (or when full). Each caller still gets
 * its own TaskInfo or typed error, the same as from an RPC of its own.
 */
export class Client {
  private readonly tasks: TaskClient;
  private readonly batcher: EnqueueBatcher | undefined;
  private readonly logger: Logger;
  private closed = false;
  private calls = 0;
  private unaryRpcs = 0;
  /** conn is the Client's HTTP/2 connection, closed by close(). */
  private readonly conn: Http2SessionManager;
  /** rpcsOut counts the RPCs under way; close() waits for them (allSettled). */
  private rpcsOut = 0;
  private allSettled: (() => void) | undefined;

  constructor(opts: ClientOptions) {
    this.conn = createSessionManager(opts);
    this.tasks = createClient(TaskService, createTransport(opts, { sessionManager: this.conn, interceptors: [this.countRpcs] }));
    this.logger = opts.logger ?? {};
    const inFlight = opts.enqueueInFlight ?? DEFAULT_ENQUEUE_IN_FLIGHT;
    if (!Number.isInteger(inFlight) || inFlight < 1) {
      throw new TypeError(`conveyor: enqueueInFlight must be an integer of at least 1, got ${inFlight}`);
    }
    if (opts.batching ?? true) this.batcher = new EnqueueBatcher(this.tasks, inFlight);
  }

  /**
   * enqueue stores one task of type carrying payload and returns it as
   * committed, in its initial state: scheduled if delayed, blocked if it
   * has dependencies, aggregating if grouped, else pending. The server
   * applies the default of each option not given (queue "default", content
   * type application/json, priority 4, maxRetry 25). The payload is not
   * copied: do not modify it until the call returns.
   */
  async enqueue(type: string, payload?: Uint8Array, options: EnqueueCallOptions = {}): Promise<TaskInfo> {
    this.checkOpen();
    const req = enqueueRequest(type, payload, options);
    return this.send(req, options.signal);
  }

  /**
   * enqueueJSON stores one task whose payload is value as JSON (UTF-8),
   * with content type application/json unless options.contentType says
   * otherwise. A value wrapped by rawJSON is sent as its text, unchanged:
   * the way to send integers past 2^53, or JSON serialised elsewhere, byte
   * for byte. Otherwise as enqueue.
   */
  async enqueueJSON(type: string, value: unknown, options: EnqueueCallOptions = {}): Promise<TaskInfo> {
    this.checkOpen();
    const req = enqueueRequest(type, jsonPayload(value), { contentType: JSON_CONTENT_TYPE, ...options });
    return this.send(req, options.signal);
  }

  private async send(req: EnqueueRequest, signal: AbortSignal | undefined): Promise<TaskInfo> {
    this.calls++;
    if (this.batcher !== undefined) return this.batcher.enqueue(req, signal);
    if (signal?.aborted) throw abortError(signal);
    this.unaryRpcs++;
    return unaryEnqueue(this.tasks, req, signal);
  }

  /**
   * enqueueBatch stores 1..1000 tasks in one RPC. They succeed or fail
   * independently: results[i] is the outcome of items[i], `{task}` or
   * `{error}`. An item that breaks a bound fails alone, without being sent.
   * The call itself throws only if the batch is empty or too large
   * (InvalidArgumentError) or the RPC fails.
   */
  async enqueueBatch(items: EnqueueItem[], call: CallOptions = {}): Promise<BatchItemResult[]> {
    this.checkOpen();
    checkBatch(items);
    const results: BatchItemResult[] = new Array<BatchItemResult>(items.length);
    const reqs: EnqueueRequest[] = [];
    const index: number[] = []; // reqs[j] is items[index[j]]
    items.forEach((item, i) => {
      try {
        reqs.push(enqueueRequest(item.type, item.payload, item.options));
        index.push(i);
      } catch (err) {
        results[i] = { error: toConveyorError(err) };
      }
    });
    if (reqs.length === 0) return results;
    let res;
    try {
      res = await this.tasks.enqueueBatch({ items: reqs, brief: true }, { signal: call.signal });
    } catch (err) {
      throw callError(err, call.signal);
    }
    if (res.results.length !== reqs.length) {
      throw errorFor(Code.Internal, `conveyor: the server's EnqueueBatch response holds ${res.results.length} results for ${reqs.length} items`);
    }
    res.results.forEach((r, j) => {
      const i = index[j] as number;
      if (r.error !== "") results[i] = { error: itemError(r) };
      else if (r.task === undefined) {
        results[i] = { error: errorFor(Code.Internal, "conveyor: the server's EnqueueBatch result holds neither a task nor an error") };
      } else results[i] = { task: unbrief(r.task, reqs[j] as EnqueueRequest) };
    });
    return results;
  }

  /**
   * enqueueTx stores 1..1000 tasks atomically: all of them or none. If any
   * task fails (a bound, a uniqueKey already held or shared by two of the
   * items), the call throws that error and nothing is stored. A task whose
   * taskId already exists is not an error: its stored TaskInfo is returned
   * in its place. On success the tasks are returned in the order given.
   */
  async enqueueTx(items: EnqueueItem[], call: CallOptions = {}): Promise<TaskInfo[]> {
    this.checkOpen();
    checkBatch(items);
    const reqs = items.map((item, i) => {
      try {
        return enqueueRequest(item.type, item.payload, item.options);
      } catch (err) {
        const e = toConveyorError(err);
        throw errorFor(Code.InvalidArgument, `conveyor: items[${i}]: ${e.message.replace(/^conveyor: /, "")}`);
      }
    });
    let res;
    try {
      res = await this.tasks.enqueueTx({ items: reqs }, { signal: call.signal });
    } catch (err) {
      throw callError(err, call.signal);
    }
    if (res.tasks.length !== reqs.length) {
      throw errorFor(Code.Internal, `conveyor: the server's EnqueueTx response holds ${res.tasks.length} tasks for ${reqs.length} items`);
    }
    return res.tasks;
  }

  /**
   * getTask returns the task with id. An unknown (or purged) id fails with
   * NotFoundError, an empty one with InvalidArgumentError.
   */
  async getTask(id: string, call: CallOptions = {}): Promise<TaskInfo> {
    this.checkOpen();
    try {
      return await this.tasks.getTask({ id }, { signal: call.signal });
    } catch (err) {
      throw callError(err, call.signal);
    }
  }

  /** stats returns what the Client has sent so far. */
  stats(): ClientStats {
    return { enqueueCalls: this.calls, enqueueRpcs: this.unaryRpcs + (this.batcher?.rpcs ?? 0) };
  }

  /**
   * close stops the Client: later calls fail with FailedPreconditionError,
   * and enqueue calls still gathering (not sent) fail with CanceledError.
   * Calls already sent finish; then the HTTP/2 connection is closed, and
   * close resolves. (Until then an idle connection never keeps Node
   * running.)
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.batcher?.close(errorFor(Code.Canceled, "conveyor: the client was closed before the task was sent"));
    if (this.rpcsOut > 0) await new Promise<void>((resolve) => (this.allSettled = resolve));
    this.conn.abort();
    this.logger.debug?.("conveyor: client closed");
  }

  /** countRpcs keeps rpcsOut, and wakes close() when the last RPC under way ends. */
  private readonly countRpcs: Interceptor = (next) => async (req) => {
    this.rpcsOut++;
    try {
      return await next(req);
    } finally {
      if (--this.rpcsOut === 0) this.allSettled?.();
    }
  };

  private checkOpen(): void {
    if (this.closed) throw errorFor(Code.FailedPrecondition, "conveyor: the client is closed");
  }
}

/** checkBatch enforces 1..MAX_BATCH_ITEMS items. */
function checkBatch(items: EnqueueItem[]): void {
  if (!Array.isArray(items) || items.length < 1 || items.length > MAX_BATCH_ITEMS) {
    const n = Array.isArray(items) ? items.length : typeof items;
    throw errorFor(Code.InvalidArgument, `conveyor: a batch holds 1..${MAX_BATCH_ITEMS} items, got ${n}`);
  }
}
