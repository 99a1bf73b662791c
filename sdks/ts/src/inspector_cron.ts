import { clone, create, isMessage } from "@bufbuild/protobuf";
import { FieldMaskSchema } from "@bufbuild/protobuf/wkt";
import { type CronEntry, CronEntrySchema } from "./gen/conveyor/v1/admin_pb.js";
import { type InspectorRpc, invalid, rpc } from "./inspector_rpc.js";
import { type EnqueueOptions, enqueueRequest } from "./task_options.js";
import type { CallOptions } from "./client.js";

/**
 * CronTaskOptions are the options of the task a cron entry enqueues: an
 * enqueue's, but for the task id (each fire makes a new task) and the
 * queue, content type and metadata, which are fields of the entry.
 * Fixed times (deadline, processAt, expiresAt) are refused by the server,
 * as an entry fires again and again: give relative ones (processInMs,
 * expiresInMs, timeoutMs).
 */
export type CronTaskOptions = Omit<EnqueueOptions, "taskId" | "queue" | "contentType" | "metadata">;

/**
 * CronEntryInput is a cron entry as createCron takes it: a schedule and
 * the template of the task each fire enqueues. Every fired task carries
 * the metadata conveyor-cron-id and conveyor-cron-fire besides the
 * entry's; fires missed while the server was down are skipped.
 */
export interface CronEntryInput {
  /**
   * Identifies the entry: at most 1,024 bytes matching
   * ^[a-zA-Z0-9][a-zA-Z0-9-_.]*$. Unset in createCron lets the server
   * assign a ULID.
   */
  id?: string;
  /**
   * The schedule: five cron fields (six with seconds first) or a
   * descriptor (@hourly, @daily, @every 1m30s), optionally after
   * "CRON_TZ=Area/City " (UTC without one).
   */
  spec: string;
  /** The queue the fired tasks go to; `default` when unset. */
  queue?: string;
  /** The fired tasks' type; required. */
  type: string;
  /** The fired tasks' payload; empty when unset. */
  payload?: Uint8Array;
  /** The payload's codec; application/json when unset. */
  contentType?: string;
  /** Copied to every fired task. */
  metadata?: Record<string, string>;
  /** Applied to every fired task. */
  options?: CronTaskOptions;
  /**
   * Whether the entry is created paused (it does not fire). updateCron
   * without fields stores it as given; otherwise pauseCron and resumeCron
   * change it. Default false.
   */
  paused?: boolean;
}

/**
 * CronEntryUpdate is what updateCron takes: the id of the entry, and the
 * fields to store (those the call's CronFields name, or all of them).
 */
export type CronEntryUpdate = Partial<CronEntryInput> & { id: string };

/** CRON_OPTIONS maps each option of CronTaskOptions to its name on the wire (conveyor.v1.TaskOptions). */
const CRON_OPTIONS: Record<keyof CronTaskOptions, string> = {
  maxRetry: "max_retry",
  timeoutMs: "timeout",
  deadline: "deadline",
  processAt: "process_at",
  processInMs: "process_in",
  uniqueKey: "unique_key",
  uniqueTtlMs: "unique_ttl",
  priority: "priority",
  retentionMs: "retention",
  group: "group",
  expiresAt: "expires_at",
  expiresInMs: "expires_in",
  dependsOn: "depends_on",
  concurrencyKey: "concurrency_key",
  retryPolicy: "retry_policy",
  atMostOnce: "at_most_once",
};

/** CRON_FIELDS maps each whole field of CronEntryInput updateCron can name to its name on the wire. */
const CRON_FIELDS = {
  spec: "spec",
  queue: "queue",
  type: "type",
  payload: "payload",
  contentType: "content_type",
  metadata: "metadata",
  options: "options",
} as const;

/**
 * CronField names a field of a CronEntryInput for updateCron: a whole
 * field (`options` names every option at once), or one option as
 * `options.NAME`, such as `options.priority` or `options.maxRetry`.
 */
export type CronField = keyof typeof CRON_FIELDS | `options.${keyof CronTaskOptions}`;

/**
 * cronEntry is e on the wire, its template checked as an enqueue's task
 * is (bounds, names, option exclusions), so a bad one fails before any
 * call with an InvalidArgumentError naming the field.
 */
export function cronEntry(e: Partial<CronEntryInput>): CronEntry {
  // An update that leaves the type alone gives none (undefined): a stand-in passes
  // enqueueRequest's check of it, and is not sent.
  const req = enqueueRequest(e.type ?? "-", e.payload, {
    ...e.options, queue: e.queue, contentType: e.contentType, metadata: e.metadata,
  });
  return create(CronEntrySchema, {
    id: e.id ?? "", spec: e.spec ?? "", queue: req.queue, type: e.type ?? "", payload: req.payload,
    contentType: req.contentType, metadata: req.metadata, options: req.options, paused: e.paused ?? false,
  });
}

/** template is an entry read back (getCron) without the server's fields, which no call takes. */
function template(e: CronEntry): CronEntry {
  const out = clone(CronEntrySchema, e);
  out.nextRunAt = undefined;
  out.lastRunAt = undefined;
  out.lastTaskId = "";
  out.lastError = "";
  return out;
}

/** cronPath is f's path on the wire, or an InvalidArgumentError for what is not a CronField. */
function cronPath(f: CronField, i: number): string {
  if (Object.hasOwn(CRON_FIELDS, f)) return CRON_FIELDS[f as keyof typeof CRON_FIELDS];
  const option = typeof f === "string" && f.startsWith("options.") ? f.slice("options.".length) : "";
  if (Object.hasOwn(CRON_OPTIONS, option)) return `options.${CRON_OPTIONS[option as keyof CronTaskOptions]}`;
  return invalid(`fields[${i}] ${JSON.stringify(f)} is not a CronField: the fields are ${Object.keys(CRON_FIELDS).join(", ")} and options.NAME`);
}

/** createCron is Inspector.createCron. */
export async function createCron(c: InspectorRpc, entry: CronEntryInput, call: CallOptions): Promise<CronEntry> {
  const msg = cronEntry(entry);
  return rpc(call.signal, () => c.admin.createCron({ entry: msg }, { signal: call.signal }));
}

/** getCron is Inspector.getCron. */
export async function getCron(c: InspectorRpc, id: string, call: CallOptions): Promise<CronEntry> {
  return rpc(call.signal, () => c.admin.getCron({ id }, { signal: call.signal }));
}

/** listCrons is Inspector.listCrons. */
export async function listCrons(c: InspectorRpc, call: CallOptions): Promise<CronEntry[]> {
  const res = await rpc(call.signal, () => c.admin.listCrons({}, { signal: call.signal }));
  return res.entries;
}

/** updateCron is Inspector.updateCron. */
export async function updateCron(
  c: InspectorRpc,
  entry: CronEntryUpdate | CronEntry,
  fields: CronField[],
  call: CallOptions,
): Promise<CronEntry> {
  const msg = isMessage(entry, CronEntrySchema) ? template(entry) : cronEntry(entry);
  const paths = fields.map(cronPath);
  const updateMask = paths.length > 0 ? create(FieldMaskSchema, { paths }) : undefined;
  return rpc(call.signal, () => c.admin.updateCron({ entry: msg, updateMask }, { signal: call.signal }));
}

/** deleteCron is Inspector.deleteCron. */
export async function deleteCron(c: InspectorRpc, id: string, call: CallOptions): Promise<void> {
  await rpc(call.signal, () => c.admin.deleteCron({ id }, { signal: call.signal }));
}

/** setCronPaused is Inspector.pauseCron and resumeCron. */
export async function setCronPaused(c: InspectorRpc, id: string, paused: boolean, call: CallOptions): Promise<CronEntry> {
  const opts = { signal: call.signal };
  return rpc(call.signal, () => (paused ? c.admin.pauseCron({ id }, opts) : c.admin.resumeCron({ id }, opts)));
}
