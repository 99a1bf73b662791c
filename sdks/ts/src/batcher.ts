import { clone } from "@bufbuild/protobuf";
import { Code, type Client as ConnectClient } from "@connectrpc/connect";
import { abortError, codeOf, type ConveyorError, errorFor, toConveyorError } from "./errors.js";
import type { TaskService } from "./gen/conveyor/v1/service_pb.js";
import {
  type EnqueueBatchResult,
  type EnqueueRequest,
  type TaskInfo,
  TaskDependencySchema,
  TaskOptionsSchema,
} from "./gen/conveyor/v1/task_pb.js";

/** The TaskService client the batcher calls. */
export type TaskClient = ConnectClient<typeof TaskService>;

/**
 * Bounds of one gathered EnqueueBatch: the server's item limit, and a few
 * MiB of request so that one batch never holds up the connection (or nears
 * the server's 32 MiB request bound) for long.
 */
const BATCH_MAX_ITEMS = 1000;
const BATCH_MAX_BYTES = 4 << 20;

/** MAX_LINGER_MS bounds how long calls gather after a shared RPC returned. */
const MAX_LINGER_MS = 1;

/**
 * DEFAULT_ENQUEUE_IN_FLIGHT is how many enqueue RPCs a Client has out before
 * further enqueue calls gather into a shared EnqueueBatch: two, as the Go
 * SDK measured, so that two concurrent callers each still get an RPC at
 * once while a heavier load shares RPCs.
 */
export const DEFAULT_ENQUEUE_IN_FLIGHT = 2;

/** One caller waiting in a batch. */
interface Call {
  req: EnqueueRequest;
  size: number;
  signal: AbortSignal | undefined;
  removed: boolean;
  settled: boolean;
  resolve: (t: TaskInfo) => void;
  reject: (e: ConveyorError) => void;
  onAbort: (() => void) | undefined;
}

/** The calls of one batch. */
interface Batch {
  calls: Call[]; // in arrival order; some may have been removed
  live: number; // calls not removed
  bytes: number; // the estimated request bytes of the live calls
  left: boolean; // the batch has left: no call is removed any more
  controller: AbortController | undefined; // set when it leaves
  waiting: number; // callers still waiting for the outcome once it left
}

/**
 * itemError is the typed error of a failed EnqueueBatch item, from the
 * code the server gave for it (CONTRACT "Per-item error codes").
 */
export function itemError(r: EnqueueBatchResult): ConveyorError {
  return errorFor(codeOf(r.code), r.error);
}

/**
 * unbrief fills a brief TaskInfo (EnqueueBatchRequest.brief) back from the
 * request it answers, so that it is the TaskInfo a unary Enqueue returns:
 * the server leaves out what the producer sent (payload, metadata,
 * options) and stores them as sent. A field the server did send is kept.
 */
export function unbrief(t: TaskInfo, req: EnqueueRequest): TaskInfo {
  if (t.payload.length === 0 && req.payload.length > 0) t.payload = req.payload.slice();
  if (Object.keys(t.metadata).length === 0 && Object.keys(req.metadata).length > 0) t.metadata = { ...req.metadata };
  if (t.options === undefined && req.options !== undefined) t.options = clone(TaskOptionsSchema, req.options);
  if (t.dependsOn.length === 0 && t.options !== undefined && t.options.dependsOn.length > 0) {
    t.dependsOn = t.options.dependsOn.map((d) => clone(TaskDependencySchema, d));
  }
  return t;
}

/**
 * estimateSize bounds from above what req takes in an EnqueueBatchRequest
 * (a string of n UTF-16 units is at most 3n UTF-8 bytes), without
 * serialising it twice: only the batch's byte bound depends on it.
 */
function estimateSize(req: EnqueueRequest): number {
  let n = 32 + req.payload.length + 3 * (req.type.length + req.queue.length + req.contentType.length + req.taskId.length);
  for (const [k, v] of Object.entries(req.metadata)) n += 8 + 3 * (k.length + v.length);
  const o = req.options;
  if (o !== undefined) n += 256 + 3 * (o.uniqueKey.length + o.group.length + o.concurrencyKey.length) + 40 * o.dependsOn.length;
  return n;
}

/**
 * unaryEnqueue is one Enqueue RPC, its failure as a ConveyorError.
 */
export async function unaryEnqueue(tasks: TaskClient, req: EnqueueRequest, signal?: AbortSignal): Promise<TaskInfo> {
  let res;
  try {
    res = await tasks.enqueue(req, { signal });
  } catch (err) {
    if (signal?.aborted) throw abortError(signal);
    throw toConveyorError(err);
  }
  if (res.task === undefined) throw errorFor(Code.Internal, "conveyor: the server's Enqueue response holds no task");
  return res.task;
}

/**
 * EnqueueBatcher lets concurrent Client.enqueue calls share RPCs, as the Go
 * SDK's batcher does. While fewer than maxInFlight enqueue RPCs are out, a
 * call goes out at once, on its own (a plain Enqueue): an idle producer
 * waits for nothing. Otherwise the call joins the gathering batch, which
 * leaves as one EnqueueBatch as soon as an RPC returns, or at once when it
 * is full (1,000 items, or 4 MiB with the next item). A batch of one leaves
 * as a plain Enqueue.
 *
 * When a batch of several calls returns, its callers usually come back
 * with their next calls a moment later (in the same turn of the event loop,
 * once their promises resolve). Sending the gathering batch at once would
 * catch only the calls made while the RPC was out, and the early and late
 * callers would alternate in small batches. So the batcher lingers: for at
 * most half that RPC's round trip (and 1 ms), new calls gather until there
 * are as many as the returned batch served, then leave together.
 *
 * Each caller gets its own outcome. A caller whose signal fires while its
 * batch still gathers is taken out of it and its task is never sent; once
 * the batch has left, the caller gets its abort error and its task is in
 * doubt, as after a unary call cut short. The batch's RPC is aborted only
 * when every caller in it has given up.
 */
export class EnqueueBatcher {
  private inFlight = 0;
  private gathering: Batch | undefined;
  // While lingering, how many gathered calls end the linger (0: not
  // lingering); lingerGen tells a linger's timer whether it is current.
  private lingerTarget = 0;
  private lingerGen = 0;
  private lingerTimer: NodeJS.Timeout | undefined;

  /** rpcs counts the RPCs sent (Enqueue and EnqueueBatch), for tests and metrics. */
  rpcs = 0;

  constructor(
    private readonly tasks: TaskClient,
    private readonly maxInFlight: number,
  ) {}

  /** enqueue stores one task, sharing an RPC with concurrent calls when one is already out. */
  async enqueue(req: EnqueueRequest, signal?: AbortSignal): Promise<TaskInfo> {
    if (signal?.aborted) throw abortError(signal);
    if (this.gathering === undefined && this.inFlight < this.maxInFlight && this.lingerTarget === 0) {
      this.inFlight++;
      this.rpcs++;
      try {
        return await unaryEnqueue(this.tasks, req, signal);
      } finally {
        this.returned(1, 0);
      }
    }
    return new Promise<TaskInfo>((resolve, reject) => this.join(req, signal, resolve, reject));
  }

  /** close fails every call still gathering; calls already sent keep their RPC. */
  close(err: ConveyorError): void {
    const g = this.gathering;
    this.gathering = undefined;
    this.lingerTarget = 0;
    clearTimeout(this.lingerTimer);
    if (g === undefined) return;
    g.left = true;
    for (const c of g.calls) if (!c.removed) finish(c, err);
  }

  private join(
    req: EnqueueRequest,
    signal: AbortSignal | undefined,
    resolve: (t: TaskInfo) => void,
    reject: (e: ConveyorError) => void,
  ): void {
    const call: Call = { req, size: estimateSize(req), signal, removed: false, settled: false, resolve, reject, onAbort: undefined };
    if (this.gathering !== undefined && this.gathering.bytes + call.size > BATCH_MAX_BYTES) {
      this.leave(); // full: this call would take it past its bytes
    }
    this.gathering ??= { calls: [], live: 0, bytes: 0, left: false, controller: undefined, waiting: 0 };
    const g = this.gathering;
    g.calls.push(call);
    g.live++;
    g.bytes += call.size;
    if (signal !== undefined) {
      call.onAbort = () => this.abandon(g, call);
      signal.addEventListener("abort", call.onAbort, { once: true });
    }
    if (g.live >= BATCH_MAX_ITEMS || g.bytes >= BATCH_MAX_BYTES) {
      this.leave();
    } else if (this.lingerTarget > 0 && g.live >= this.lingerTarget) {
      this.lingerTarget = 0;
      if (this.inFlight < this.maxInFlight) this.leave();
    }
  }

  /** abandon handles a caller whose signal fired while it waited in g. */
  private abandon(g: Batch, call: Call): void {
    if (call.settled || call.signal === undefined) return;
    if (!g.left) {
      call.removed = true;
      g.live--;
      g.bytes -= call.size;
      if (g.live === 0 && this.gathering === g) this.gathering = undefined;
      finish(call, abortError(call.signal));
      return;
    }
    finish(call, abortError(call.signal));
    g.waiting--;
    if (g.waiting === 0) g.controller?.abort(); // nobody waits for the outcome any more
  }

  /**
   * returned accounts for an RPC that returned after tookMs, having served
   * that many calls, and sends the gathering batch, if any, in its place,
   * or lingers first for the served callers to come back.
   */
  private returned(served: number, tookMs: number): void {
    this.inFlight--;
    if (this.inFlight >= this.maxInFlight) return;
    const wait = Math.min(tookMs / 2, MAX_LINGER_MS);
    if (served > 1 && wait > 0 && (this.gathering === undefined || this.gathering.live < served)) {
      this.linger(served, wait);
      return;
    }
    if (this.gathering !== undefined) this.leave();
  }

  /** linger lets calls gather until target of them wait or waitMs has passed. */
  private linger(target: number, waitMs: number): void {
    this.lingerTarget = target;
    const gen = ++this.lingerGen;
    clearTimeout(this.lingerTimer);
    this.lingerTimer = setTimeout(() => {
      if (this.lingerGen !== gen || this.lingerTarget === 0) return;
      this.lingerTarget = 0;
      if (this.gathering !== undefined && this.inFlight < this.maxInFlight) this.leave();
    }, waitMs);
    this.lingerTimer.unref();
  }

  /**
   * leave sends the gathering batch. A caller whose signal has fired is
   * taken out here, its task not sent, even if its abort listener has not
   * run yet.
   */
  private leave(): void {
    const g = this.gathering;
    if (g === undefined) return;
    this.gathering = undefined;
    g.left = true;
    const calls: Call[] = [];
    for (const c of g.calls) {
      if (c.removed) continue;
      if (c.signal?.aborted) {
        c.removed = true;
        finish(c, abortError(c.signal));
        continue;
      }
      calls.push(c);
    }
    g.calls = [];
    if (calls.length === 0) return; // every caller gave up: nothing to send
    g.waiting = calls.length;
    g.controller = new AbortController();
    this.inFlight++;
    this.rpcs++;
    void this.send(g.controller.signal, calls);
  }

  /** send makes the RPC of one batch and hands each caller its outcome. */
  private async send(signal: AbortSignal, calls: Call[]): Promise<void> {
    if (calls.length === 1) {
      // A batch of one is a plain Enqueue, on its caller's signal.
      const c = calls[0] as Call;
      let info: TaskInfo | undefined;
      let err: ConveyorError | undefined;
      try {
        info = await unaryEnqueue(this.tasks, c.req, c.signal);
      } catch (e) {
        err = toConveyorError(e);
      }
      this.returned(1, 0);
      finish(c, err, info);
      return;
    }
    const start = performance.now();
    let results: EnqueueBatchResult[];
    try {
      const res = await this.tasks.enqueueBatch({ items: calls.map((c) => c.req), brief: true }, { signal });
      results = res.results;
      if (results.length !== calls.length) {
        throw errorFor(
          Code.Internal,
          `conveyor: the server's EnqueueBatch response holds ${results.length} results for ${calls.length} items`,
        );
      }
    } catch (e) {
      this.returned(calls.length, performance.now() - start);
      const err = toConveyorError(e);
      for (const c of calls) finish(c, err);
      return;
    }
    this.returned(calls.length, performance.now() - start);
    const uncoded: Call[] = [];
    results.forEach((r, i) => {
      const c = calls[i] as Call;
      if (r.error !== "" && r.code === "") uncoded.push(c);
      else if (r.error !== "") finish(c, itemError(r));
      else if (r.task === undefined) {
        finish(c, errorFor(Code.Internal, "conveyor: the server's EnqueueBatch result holds neither a task nor an error"));
      } else finish(c, undefined, unbrief(r.task, c.req));
    });
    // A server older than per-item codes said why an item failed but not
    // with which code. The item was not stored, so sending it again on its
    // own is safe, and gives its caller the error a unary call would have.
    for (const c of uncoded) {
      unaryEnqueue(this.tasks, c.req, c.signal).then(
        (t) => finish(c, undefined, t),
        (e: unknown) => finish(c, toConveyorError(e)),
      );
    }
  }
}

/** finish settles a call once, and drops its abort listener. */
function finish(c: Call, err: ConveyorError | undefined, info?: TaskInfo): void {
  if (c.settled) return;
  c.settled = true;
  if (c.onAbort !== undefined) c.signal?.removeEventListener("abort", c.onAbort);
  if (err !== undefined) c.reject(err);
  else c.resolve(info as TaskInfo);
}
