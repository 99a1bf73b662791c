import { create } from "@bufbuild/protobuf";
import { type Duration, DurationSchema, timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code } from "@connectrpc/connect";
import { errorFor } from "./errors.js";
import {
  type EnqueueRequest,
  EnqueueRequestSchema,
  OnFailure,
  RetryStrategy,
  type TaskOptions,
  TaskOptionsSchema,
} from "./gen/conveyor/v1/task_pb.js";

/**
 * The protocol's bounds on what a producer sends (§6.1 and the "Bounds on
 * every input" table of docs/protocol.md). The server enforces the same
 * numbers; the Client checks them first so that a bad task fails at once,
 * with a message naming the field, and never costs a round trip or, in a
 * gathered batch, a slot another caller could use.
 */

/** MAX_PAYLOAD_BYTES bounds one task's payload (1 MiB). */
export const MAX_PAYLOAD_BYTES = 1 << 20;
/** MAX_BATCH_ITEMS bounds the tasks of one enqueueBatch or enqueueTx (1,000). */
export const MAX_BATCH_ITEMS = 1000;
/** MAX_NAME_BYTES bounds a queue name, type, content type and key (1,024 bytes). */
export const MAX_NAME_BYTES = 1024;
/** MAX_METADATA_ENTRIES bounds the entries of one task's metadata (64). */
export const MAX_METADATA_ENTRIES = 64;
/** MAX_METADATA_BYTES bounds one task's metadata keys and values together (64 KiB). */
export const MAX_METADATA_BYTES = 64 << 10;
/** MAX_DEPENDENCIES bounds the dependencies of one task (1,000). */
export const MAX_DEPENDENCIES = 1000;
/** MAX_INT32 is the largest value of the wire's int32 fields (maxRetry). */
export const MAX_INT32 = 2 ** 31 - 1;

const QUEUE_NAME = /^[a-zA-Z0-9][a-zA-Z0-9\-_.]*$/;

/**
 * validQueueName reports whether name matches ^[a-zA-Z0-9][a-zA-Z0-9-_.]*$
 * and is at most MAX_NAME_BYTES long: the server's rule for a queue name.
 * (The pattern is ASCII, so its length in UTF-16 units is its byte count.)
 */
export function validQueueName(name: string): boolean {
  return typeof name === "string" && name.length <= MAX_NAME_BYTES && QUEUE_NAME.test(name);
}

/** Dependency names a task that must succeed before the dependent task may run. */
export interface Dependency {
  /** The ULID of the task depended on. */
  taskId: string;
  /**
   * What happens to the dependent task when this one fails for good:
   * `OnFailure.BLOCK` (the server's default) keeps it blocked,
   * `CASCADE_CANCEL` cancels it, `CONTINUE` runs it anyway.
   */
  onFailure?: OnFailure;
}

/** RetryPolicyOptions override the server's retry backoff for one task. */
export interface RetryPolicyOptions {
  /** The backoff curve; the server's default when unset. */
  strategy?: RetryStrategy;
  /** The first delay (exponential, linear) or the only one (fixed); the server's default when unset. */
  baseMs?: number;
  /** Caps every delay; no cap beyond the strategy's own when unset. */
  maxMs?: number;
}

/**
 * EnqueueOptions are one task's settings, each optional: the server applies
 * the default documented on each field when it is unset. The Client checks
 * every bound the server checks before it sends, and throws (or, in a batch,
 * reports) an InvalidArgumentError naming the field, so a bad option never
 * costs a round trip.
 */
export interface EnqueueOptions {
  /** A client-assigned ULID; enqueueing it again fails with AlreadyExistsError, so a retry is safe. Default: the server assigns one. */
  taskId?: string;
  /** The queue; `default` unless set. Must match ^[a-zA-Z0-9][a-zA-Z0-9-_.]*$ and be at most 1,024 bytes. */
  queue?: string;
  /** The payload's codec; the server stores `application/json` when unset. */
  contentType?: string;
  /** A string map carried to the worker (tags, trace propagation): at most 64 entries and 64 KiB. */
  metadata?: Record<string, string>;
  /** How many times a failing task is retried before it is archived; 0 or unset means the server's 25. */
  maxRetry?: number;
  /** Bounds one attempt, in milliseconds; unset means no bound. */
  timeoutMs?: number;
  /** A time after which the task must not run. */
  deadline?: Date;
  /** Delays the task until this time. Exclusive with processInMs and group. */
  processAt?: Date;
  /** Delays the task by this many milliseconds from its enqueue. Exclusive with processAt and group. */
  processInMs?: number;
  /** Claims uniqueness among incomplete tasks: a second enqueue with the key fails with AlreadyExistsError. */
  uniqueKey?: string;
  /** How long the uniqueKey claim lasts, in milliseconds; unset or 0 means until the task completes. Needs uniqueKey. */
  uniqueTtlMs?: number;
  /** 1 (lowest) to 9 (highest); 0 or unset means the server's 4. */
  priority?: number;
  /** How long the completed task is kept, in milliseconds; 0 purges it at the server's next round (within a second); unset means the server's 24h. */
  retentionMs?: number;
  /** An aggregation group: the task waits and is delivered with its group as one batch. Exclusive with processAt, processInMs and concurrencyKey. */
  group?: string;
  /** Archives the task if it still waits at this time. Exclusive with expiresInMs. */
  expiresAt?: Date;
  /** Archives the task if it still waits this many milliseconds after its enqueue. Exclusive with expiresAt. */
  expiresInMs?: number;
  /** Tasks that must succeed first (at most 1,000); until then the task is blocked. */
  dependsOn?: Dependency[];
  /** Caps how many tasks sharing this key run at once. Exclusive with group. */
  concurrencyKey?: string;
  /** Overrides the server's retry backoff. */
  retryPolicy?: RetryPolicyOptions;
  /**
   * Makes the task at most once: it is never run a second time after a run
   * whose outcome is unknown. It goes only to a worker that asks the server
   * before it starts it (start authorization; this SDK's Worker does, push
   * endpoints never get one), and once a start was authorized, an attempt
   * that ends with no outcome (the worker dies, the stream or the lease is
   * lost) leaves the task ARCHIVED with a last error beginning "outcome
   * unknown:", for an operator to rerun or not, instead of released or
   * retried. An outcome the handler did report stands as for any task: a
   * thrown error is retried (each attempt asks to start again). Exclusive
   * with group. Default false.
   */
  atMostOnce?: boolean;
}

/** EnqueueItem is one task of enqueueBatch or enqueueTx. */
export interface EnqueueItem {
  /** The handler routing key (required, at most 1,024 bytes). */
  type: string;
  /** The payload, at most 1 MiB; empty unless set. */
  payload?: Uint8Array;
  /** The task's settings. */
  options?: EnqueueOptions;
}

const encoder = new TextEncoder();

function invalid(message: string): never {
  throw errorFor(Code.InvalidArgument, `conveyor: ${message}`);
}

function byteLength(s: string): number {
  // A string of n UTF-16 units is at most 3n UTF-8 bytes: encode only when it may pass the bound.
  return s.length * 3 <= MAX_NAME_BYTES ? s.length : encoder.encode(s).length;
}

function quote(s: string): string {
  return JSON.stringify(s.length > 64 ? `${s.slice(0, 64)}…` : s);
}

function checkName(field: string, value: string): void {
  if (typeof value !== "string") invalid(`${field} must be a string, got ${typeof value}`);
  const n = byteLength(value);
  if (n > MAX_NAME_BYTES) invalid(`${field} is ${n} bytes; the limit is ${MAX_NAME_BYTES}`);
}

function checkInt(field: string, value: number, min: number, max: number): void {
  if (!Number.isInteger(value) || value < min || value > max) {
    invalid(`${field} must be an integer in ${min}..${max}, got ${value}`);
  }
}

// The protobuf Duration's range: 10,000 years.
const MAX_DURATION_MS = 315_576_000_000_000;

function checkMs(field: string, value: number): void {
  if (typeof value !== "number" || !Number.isFinite(value) || value < 0 || value > MAX_DURATION_MS) {
    invalid(`${field} must be a number of milliseconds in 0..${MAX_DURATION_MS}, got ${value}`);
  }
}

/** durationFromMs is ms as a Duration, to the nanosecond (the wire's nanos are an integer). */
function durationFromMs(ms: number): Duration {
  let seconds = Math.floor(ms / 1000);
  let nanos = Math.round((ms - seconds * 1000) * 1e6);
  if (nanos >= 1e9) {
    seconds++;
    nanos -= 1e9;
  }
  return create(DurationSchema, { seconds: BigInt(seconds), nanos });
}

// The protobuf Timestamp's range: 0001-01-01 to 9999-12-31.
const MIN_TIME = -62135596800000;
const MAX_TIME = 253402300799999;

function checkDate(field: string, value: Date): void {
  if (!(value instanceof Date) || Number.isNaN(value.getTime())) invalid(`${field} must be a valid Date`);
  const t = value.getTime();
  if (t < MIN_TIME || t > MAX_TIME) invalid(`${field} ${value.toISOString()} is outside years 1..9999`);
}

const ULID = /^[0-7][0-9A-HJKMNP-TV-Za-hjkmnp-tv-z]{25}$/;

function checkULID(field: string, value: string): void {
  if (typeof value !== "string" || !ULID.test(value)) invalid(`${field} ${quote(String(value))} is not a ULID`);
}

function checkMetadata(md: Record<string, string>): void {
  const entries = Object.entries(md);
  if (entries.length > MAX_METADATA_ENTRIES) {
    invalid(`metadata has ${entries.length} entries; the limit is ${MAX_METADATA_ENTRIES}`);
  }
  let n = 0;
  for (const [k, v] of entries) {
    if (typeof v !== "string") invalid(`metadata[${quote(k)}] must be a string, got ${typeof v}`);
    n += encoder.encode(k).length + encoder.encode(v).length;
  }
  if (n > MAX_METADATA_BYTES) invalid(`metadata keys and values are ${n} bytes in all; the limit is ${MAX_METADATA_BYTES} (64 KiB)`);
}

function checkExclusive(o: EnqueueOptions): void {
  const has = (v: unknown) => v !== undefined;
  if (has(o.processAt) && has(o.processInMs)) invalid("processAt and processInMs are mutually exclusive");
  if (has(o.expiresAt) && has(o.expiresInMs)) invalid("expiresAt and expiresInMs are mutually exclusive");
  if (o.group && (has(o.processAt) || has(o.processInMs))) {
    invalid("group is mutually exclusive with processAt and processInMs");
  }
  if (o.group && o.concurrencyKey) invalid("group and concurrencyKey are mutually exclusive");
  if (o.group && o.atMostOnce) invalid("group and atMostOnce are mutually exclusive");
  if (o.uniqueTtlMs && !o.uniqueKey) invalid("uniqueTtlMs requires uniqueKey");
}

function dependencies(deps: Dependency[]): TaskOptions["dependsOn"] {
  if (!Array.isArray(deps)) invalid("dependsOn must be an array");
  if (deps.length > MAX_DEPENDENCIES) invalid(`dependsOn lists ${deps.length} tasks; the limit is ${MAX_DEPENDENCIES}`);
  return deps.map((d, i) => {
    checkULID(`dependsOn[${i}].taskId`, d.taskId);
    const onFailure = d.onFailure ?? OnFailure.UNSPECIFIED;
    if (OnFailure[onFailure] === undefined) invalid(`dependsOn[${i}].onFailure ${onFailure} is not an OnFailure`);
    return { $typeName: "conveyor.v1.TaskDependency" as const, taskId: d.taskId, onFailure, state: 0 };
  });
}

function retryPolicy(p: RetryPolicyOptions): TaskOptions["retryPolicy"] {
  const strategy = p.strategy ?? RetryStrategy.UNSPECIFIED;
  if (RetryStrategy[strategy] === undefined) invalid(`retryPolicy.strategy ${strategy} is not a RetryStrategy`);
  if (p.baseMs !== undefined) checkMs("retryPolicy.baseMs", p.baseMs);
  if (p.maxMs !== undefined) checkMs("retryPolicy.maxMs", p.maxMs);
  if (p.baseMs && p.maxMs && p.maxMs < p.baseMs) {
    invalid(`retryPolicy.maxMs (${p.maxMs}) is less than retryPolicy.baseMs (${p.baseMs})`);
  }
  return {
    $typeName: "conveyor.v1.RetryPolicy",
    strategy,
    base: p.baseMs ? durationFromMs(p.baseMs) : undefined,
    max: p.maxMs ? durationFromMs(p.maxMs) : undefined,
  };
}

/**
 * taskOptions checks o and returns the wire TaskOptions, or undefined when
 * no option is set (the server stores an empty message as none).
 */
function taskOptions(o: EnqueueOptions): TaskOptions | undefined {
  checkExclusive(o);
  const out = create(TaskOptionsSchema);
  let set = false;
  const mark = () => {
    set = true;
  };
  if (o.maxRetry !== undefined) {
    checkInt("maxRetry", o.maxRetry, 0, MAX_INT32);
    out.maxRetry = o.maxRetry;
    mark();
  }
  if (o.priority !== undefined) {
    checkInt("priority", o.priority, 0, 9);
    out.priority = o.priority;
    mark();
  }
  const ms: [keyof EnqueueOptions, (d: Duration) => void][] = [
    ["timeoutMs", (d) => (out.timeout = d)],
    ["processInMs", (d) => (out.processIn = d)],
    ["retentionMs", (d) => (out.retention = d)],
    ["expiresInMs", (d) => (out.expiresIn = d)],
  ];
  for (const [field, put] of ms) {
    const v = o[field];
    if (v === undefined) continue;
    checkMs(field, v as number);
    put(durationFromMs(v as number));
    mark();
  }
  if (o.uniqueTtlMs !== undefined) {
    checkMs("uniqueTtlMs", o.uniqueTtlMs);
    if (o.uniqueTtlMs > 0) {
      out.uniqueTtl = durationFromMs(o.uniqueTtlMs);
      mark();
    }
  }
  const dates: [keyof EnqueueOptions, (t: ReturnType<typeof timestampFromDate>) => void][] = [
    ["deadline", (t) => (out.deadline = t)],
    ["processAt", (t) => (out.processAt = t)],
    ["expiresAt", (t) => (out.expiresAt = t)],
  ];
  for (const [field, put] of dates) {
    const v = o[field];
    if (v === undefined) continue;
    checkDate(field, v as Date);
    put(timestampFromDate(v as Date));
    mark();
  }
  for (const field of ["uniqueKey", "group", "concurrencyKey"] as const) {
    const v = o[field];
    if (v === undefined || v === "") continue;
    checkName(field, v);
    out[field] = v;
    mark();
  }
  if (o.dependsOn !== undefined && o.dependsOn.length > 0) {
    out.dependsOn = dependencies(o.dependsOn);
    mark();
  }
  if (o.retryPolicy !== undefined) {
    out.retryPolicy = retryPolicy(o.retryPolicy);
    mark();
  }
  if (o.atMostOnce !== undefined) {
    if (typeof o.atMostOnce !== "boolean") invalid(`atMostOnce must be a boolean, got ${typeof o.atMostOnce}`);
    if (o.atMostOnce) {
      out.atMostOnce = true;
      mark();
    }
  }
  return set ? out : undefined;
}

/**
 * enqueueRequest checks one task against the protocol's bounds and returns
 * the request to send, or throws an InvalidArgumentError naming the field at
 * fault. The payload is not copied.
 */
export function enqueueRequest(type: string, payload: Uint8Array | undefined, o: EnqueueOptions = {}): EnqueueRequest {
  if (typeof type !== "string" || type === "") invalid("type is required");
  checkName("type", type);
  if (payload !== undefined && !(payload instanceof Uint8Array)) invalid("payload must be a Uint8Array");
  if (payload && payload.length > MAX_PAYLOAD_BYTES) {
    invalid(`payload is ${payload.length} bytes; the limit is ${MAX_PAYLOAD_BYTES} (1 MiB)`);
  }
  const req = create(EnqueueRequestSchema, { type });
  if (payload) req.payload = payload;
  if (o.taskId !== undefined && o.taskId !== "") {
    checkULID("taskId", o.taskId);
    req.taskId = o.taskId;
  }
  if (o.queue !== undefined && o.queue !== "") {
    if (!validQueueName(o.queue)) {
      invalid(`queue ${quote(o.queue)} must match ^[a-zA-Z0-9][a-zA-Z0-9-_.]*$ (at most ${MAX_NAME_BYTES} bytes)`);
    }
    req.queue = o.queue;
  }
  if (o.contentType !== undefined && o.contentType !== "") {
    checkName("contentType", o.contentType);
    req.contentType = o.contentType;
  }
  if (o.metadata !== undefined) {
    checkMetadata(o.metadata);
    req.metadata = { ...o.metadata };
  }
  req.options = taskOptions(o);
  return req;
}
