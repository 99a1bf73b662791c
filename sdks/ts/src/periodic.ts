import { Code, ConnectError } from "@connectrpc/connect";
import { create } from "@bufbuild/protobuf";
import { FieldMaskSchema } from "@bufbuild/protobuf/wkt";
import type { AdminClient } from "./admin.js";
import type { CronEntry } from "./gen/conveyor/v1/admin_pb.js";
import { cronEntry } from "./inspector_cron.js";
import type { EnqueueOptions } from "./task_options.js";

/**
 * Periodic jobs: cron entries declared beside the handlers that run them.
 * The server fires cron entries; a Worker only keeps those it declares in
 * step with its code, when run() starts, before its session opens. An
 * entry is the server's, by its id: declaring one that exists updates its
 * task template (and its schedule when the spec differs), so every replica
 * may declare the same entry and it still fires once per tick.
 */

/** PeriodicJob is one declared entry: its id, its spec and the task it enqueues. */
export interface PeriodicJob {
  id: string;
  /** spec: five cron fields, a descriptor (@hourly, @every 10m), optionally prefixed CRON_TZ=Zone. */
  spec: string;
  type: string;
  payload?: Uint8Array;
  /** options: the task's queue, content type, metadata and options, as for enqueue. */
  options?: EnqueueOptions;
}

/** periodicEntry is the entry job declares (its task checked as an enqueue's is). */
export function periodicEntry(job: PeriodicJob): CronEntry {
  const { queue, contentType, metadata, ...options } = job.options ?? {};
  return cronEntry({ id: job.id, spec: job.spec, type: job.type, payload: job.payload, queue, contentType, metadata, options });
}

/** TEMPLATE are the fields of an entry's task template, by their mask names. */
const TEMPLATE = ["queue", "type", "payload", "content_type", "metadata", "options"];

/**
 * declare creates entry, or, when its id exists, updates its template, and
 * its spec only when that differs: naming the spec restarts the schedule
 * from now, which a worker restarting more often than the entry fires
 * would otherwise keep doing.
 */
export async function declare(admin: AdminClient, entry: CronEntry): Promise<void> {
  try {
    await admin.createCron({ entry });
    return;
  } catch (err) {
    if (!(err instanceof ConnectError) || err.code !== Code.AlreadyExists) throw err;
  }
  const stored = await admin.getCron({ id: entry.id });
  const paths = stored.spec === entry.spec ? TEMPLATE : [...TEMPLATE, "spec"];
  await admin.updateCron({ entry, updateMask: create(FieldMaskSchema, { paths }) });
}

/** retryable reports whether a failed declaration may succeed later (the server unreachable or busy). */
export function retryable(err: unknown): boolean {
  if (!(err instanceof ConnectError)) return false;
  return [Code.Unavailable, Code.DeadlineExceeded, Code.ResourceExhausted, Code.Aborted, Code.Internal, Code.Unknown]
    .includes(err.code);
}
