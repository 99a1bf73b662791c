import { clone, create, isMessage } from "@bufbuild/protobuf";
import { type Duration, durationFromMs, FieldMaskSchema } from "@bufbuild/protobuf/wkt";
import { Code } from "@connectrpc/connect";
import { errorFor } from "./errors.js";
import {
  type GetQueueStatsResponse,
  type HistoryPoint,
  HistoryResolution,
  type QueueConfig,
  QueueConfigSchema,
  type QueueInfo,
} from "./gen/conveyor/v1/admin_pb.js";
import { checkInt32, type InspectorRpc, invalid, rpc } from "./inspector_rpc.js";
import { MAX_NAME_BYTES, validQueueName } from "./task_options.js";
import type { CallOptions } from "./client.js";

/**
 * QueueConfigInput is a queue's configuration as updateQueueConfig takes
 * it: dispatch limits, group policy, backpressure bound and push endpoint,
 * durations in milliseconds. An unset or zero field means the default.
 */
export interface QueueConfigInput {
  /** The queue's name; required. */
  queue: string;
  /** Caps how many tasks sharing one concurrency key may be active at once in the queue; 0 means the default, 1. */
  concurrencyLimit?: number;
  /** Caps how many of the queue's tasks may be active at once, across every worker; 0 means no limit. */
  maxActive?: number;
  /** A token bucket on the queue's dispatches. */
  rateLimit?: RateLimitInput;
  /** When the queue's aggregation groups fire. */
  groupPolicy?: GroupPolicyInput;
  /**
   * Bounds the tasks the queue may hold scheduled, pending, retry,
   * aggregating and blocked together; an enqueue past it waits for room,
   * then fails with ResourceExhaustedError. 0 means no bound.
   */
  maxWaiting?: number | bigint;
  /** The queue's HTTP push endpoint (docs/push.md). */
  push?: PushEndpointInput;
}

/** RateLimitInput is a token bucket on a queue's dispatches. */
export interface RateLimitInput {
  /** The refill rate; 0 means no limit. */
  perSecond?: number;
  /** The bucket's size; 0 means perSecond. */
  burst?: number;
}

/** GroupPolicyInput says when an aggregation group fires: at whichever trigger comes first. 0 takes the server's default. */
export interface GroupPolicyInput {
  /** Fires a group once it holds this many tasks. */
  maxSize?: number;
  /** Fires a group this long after its first task was enqueued. */
  maxDelayMs?: number;
  /** Fires a group this long after its latest task was enqueued. */
  gracePeriodMs?: number;
}

/** PushEndpointInput is an HTTP endpoint the server invokes with a queue's tasks (docs/push.md). */
export interface PushEndpointInput {
  /** The endpoint, http:// or https://; without a push secret the server accepts only loopback URLs. Empty: none. */
  url?: string;
  /** Bounds the invocations in flight; 0 means 10. */
  concurrency?: number;
  /** The longest one invocation may take; 0 means 30 s. The task's own timeout and deadline shorten it. */
  timeoutMs?: number;
}

/**
 * QueueSetting names one setting of a QueueConfigInput, by its path in
 * it, for updateQueueConfig. A group (rateLimit, groupPolicy, push) names
 * all of its fields at once.
 */
export type QueueSetting = keyof typeof QUEUE_SETTINGS;

/** QUEUE_SETTINGS maps each QueueSetting to its path on the wire (conveyor.v1.QueueConfig). */
const QUEUE_SETTINGS = {
  concurrencyLimit: "concurrency_limit",
  maxActive: "max_active",
  rateLimit: "rate_limit",
  "rateLimit.perSecond": "rate_limit.per_second",
  "rateLimit.burst": "rate_limit.burst",
  groupPolicy: "group_policy",
  "groupPolicy.maxSize": "group_policy.max_size",
  "groupPolicy.maxDelayMs": "group_policy.max_delay",
  "groupPolicy.gracePeriodMs": "group_policy.grace_period",
  maxWaiting: "max_waiting",
  push: "push",
  "push.url": "push.url",
  "push.concurrency": "push.concurrency",
  "push.timeoutMs": "push.timeout",
} as const;

/** listQueues is Inspector.listQueues. */
export async function listQueues(c: InspectorRpc, call: CallOptions): Promise<QueueInfo[]> {
  const res = await rpc(call.signal, () => c.admin.listQueues({}, { signal: call.signal }));
  return res.queues;
}

/** getQueue is Inspector.getQueue. */
export async function getQueue(c: InspectorRpc, name: string, call: CallOptions): Promise<QueueInfo> {
  checkQueue("queue", name);
  const q = (await listQueues(c, call)).find((q) => q.name === name);
  if (q === undefined) throw errorFor(Code.NotFound, `conveyor: queue ${JSON.stringify(name)}: not found`);
  return q;
}

/** setPaused is Inspector.pauseQueue and resumeQueue. */
export async function setPaused(c: InspectorRpc, name: string, paused: boolean, call: CallOptions): Promise<QueueInfo> {
  const opts = { signal: call.signal };
  return rpc(call.signal, () => (paused ? c.admin.pauseQueue({ queue: name }, opts) : c.admin.resumeQueue({ queue: name }, opts)));
}

/** deleteQueue is Inspector.deleteQueue. */
export async function deleteQueue(c: InspectorRpc, name: string, call: CallOptions): Promise<void> {
  await rpc(call.signal, () => c.admin.deleteQueue({ queue: name }, { signal: call.signal }));
}

/** getQueueHistory is Inspector.getQueueHistory. */
export async function getQueueHistory(
  c: InspectorRpc,
  name: string,
  resolution: HistoryResolution,
  call: CallOptions,
): Promise<HistoryPoint[]> {
  const res = await rpc(call.signal, () => c.admin.getQueueHistory({ queue: name, resolution }, { signal: call.signal }));
  return res.points;
}

/** getQueueStats is Inspector.getQueueStats. */
export async function getQueueStats(c: InspectorRpc, name: string, call: CallOptions): Promise<GetQueueStatsResponse> {
  return rpc(call.signal, () => c.admin.getQueueStats({ queue: name }, { signal: call.signal }));
}

/** getQueueConfig is Inspector.getQueueConfig and getStoredQueueConfig. */
export async function getQueueConfig(c: InspectorRpc, name: string, stored: boolean, call: CallOptions): Promise<QueueConfig> {
  return rpc(call.signal, () => c.admin.getQueueConfig({ queue: name, stored }, { signal: call.signal }));
}

/** updateQueueConfig is Inspector.updateQueueConfig. */
export async function updateQueueConfig(
  c: InspectorRpc,
  cfg: QueueConfigInput | QueueConfig,
  settings: QueueSetting[],
  call: CallOptions,
): Promise<QueueConfig> {
  const config = isMessage(cfg, QueueConfigSchema) ? storedConfig(cfg) : queueConfig(cfg);
  const paths = settings.map((s, i) => {
    const p = Object.hasOwn(QUEUE_SETTINGS, s) ? QUEUE_SETTINGS[s] : undefined;
    if (p === undefined) {
      invalid(`settings[${i}] ${JSON.stringify(s)} is not a QueueSetting; the settings are ${Object.keys(QUEUE_SETTINGS).join(", ")}`);
    }
    return p;
  });
  const updateMask = paths.length > 0 ? create(FieldMaskSchema, { paths }) : undefined;
  return rpc(call.signal, () => c.admin.updateQueueConfig({ config, updateMask }, { signal: call.signal }));
}

/** queueConfig is cfg on the wire, every number checked against its field's range. */
function queueConfig(cfg: QueueConfigInput): QueueConfig {
  checkQueue("queue", cfg.queue);
  const int = (field: string, v: number | undefined): number => {
    if (v === undefined) return 0;
    checkInt32(field, v);
    return v;
  };
  const rate = cfg.rateLimit ?? {};
  const group = cfg.groupPolicy ?? {};
  const push = cfg.push ?? {};
  return create(QueueConfigSchema, {
    queue: cfg.queue,
    concurrencyLimit: int("concurrencyLimit", cfg.concurrencyLimit),
    maxActive: int("maxActive", cfg.maxActive),
    rateLimit: { perSecond: int("rateLimit.perSecond", rate.perSecond), burst: int("rateLimit.burst", rate.burst) },
    groupPolicy: {
      maxSize: int("groupPolicy.maxSize", group.maxSize),
      maxDelay: duration("groupPolicy.maxDelayMs", group.maxDelayMs),
      gracePeriod: duration("groupPolicy.gracePeriodMs", group.gracePeriodMs),
    },
    maxWaiting: int64("maxWaiting", cfg.maxWaiting),
    push: { url: push.url ?? "", concurrency: int("push.concurrency", push.concurrency), timeout: duration("push.timeoutMs", push.timeoutMs) },
  });
}

/** storedConfig is a configuration read back (getStoredQueueConfig), to send again as it is. */
function storedConfig(cfg: QueueConfig): QueueConfig {
  checkQueue("queue", cfg.queue);
  return clone(QueueConfigSchema, cfg);
}

/** checkQueue refuses an invalid queue name before any call, as the server would. */
function checkQueue(field: string, name: string): void {
  if (!validQueueName(name)) {
    const shown = typeof name === "string" && name.length > 64 ? `${name.slice(0, 64)}…` : name;
    invalid(`${field} ${JSON.stringify(shown)} is invalid: it is required and must match ^[a-zA-Z0-9][a-zA-Z0-9-_.]*$ (at most ${MAX_NAME_BYTES} bytes)`);
  }
}

// The protobuf Duration's range: 10,000 years.
const MAX_DURATION_MS = 315_576_000_000_000;

/** duration is ms as a Duration, or none for 0 or unset (the default). */
function duration(field: string, ms: number | undefined): Duration | undefined {
  if (ms === undefined || ms === 0) return undefined;
  if (!Number.isInteger(ms) || ms < 0 || ms > MAX_DURATION_MS) {
    invalid(`${field} must be a whole number of milliseconds in 0..${MAX_DURATION_MS}, got ${ms}`);
  }
  return durationFromMs(ms);
}

const MAX_INT64 = 2n ** 63n - 1n;

function int64(field: string, v: number | bigint | undefined): bigint {
  if (v === undefined) return 0n;
  const n = typeof v === "bigint" ? v : Number.isSafeInteger(v) ? BigInt(v) : undefined;
  if (n === undefined || n < 0n || n > MAX_INT64) invalid(`${field} must be an integer in 0..${MAX_INT64}, got ${v}`);
  return n;
}
