import type { Result } from "./gen/conveyor/v1/worker_pb.js";
import { TaskOutcome } from "./gen/conveyor/v1/worker_pb.js";
import type { Execution } from "./execution.js";
import { errorMessage, type BatchHandler, type Handler } from "./handler.js";
import type { Log } from "./logger.js";

/**
 * HandlerSet is where a delivery's handler is found: a Worker's handlers,
 * which its sessions and its push handler (createPushHandler) both serve.
 */
export interface HandlerSet {
  handlerFor(type: string): Handler | undefined;
  batchHandlerFor(type: string): BatchHandler | undefined;
}

/** ProgressSink receives a handler's progress calls (already checked). */
export type ProgressSink = (percent: number, message: string) => void;

/** checkPercent throws a RangeError unless percent is between 0 and 100. */
export function checkPercent(percent: number): void {
  if (!Number.isFinite(percent) || percent < 0 || percent > 100) {
    throw new RangeError(`conveyor: progress percent ${percent} must be between 0 and 100`);
  }
}

/**
 * invoke runs ex's handler and maps its end to the Result(s), the same way
 * for a session's Dispatch and for a push request: a return is SUCCESS
 * with the returned bytes, SkipRetry is SKIP_RETRY, any other throw is
 * RETRY with its message (see Execution.resultsFor). A single delivery of
 * a type with a batch handler and no plain one runs as a batch of one; a
 * type with no handler (a push request, or a server older than routing by
 * type) fails RETRY, as the Go SDK's ErrNoHandler does: a worker that has
 * the handler may take the retry. It never rejects.
 */
export async function invoke(handlers: HandlerSet, ex: Execution, log: Log, progress: ProgressSink): Promise<Result[]> {
  const first = ex.tasks[0];
  if (!first) return [];
  const deadline = ex.bound === undefined ? undefined : new Date(ex.bound);
  const batchHandler = handlers.batchHandlerFor(first.type);
  const asBatch = ex.batch || (batchHandler !== undefined && !handlers.handlerFor(first.type));
  try {
    if (asBatch) {
      if (!batchHandler) return ex.all(TaskOutcome.RELEASED, "this worker does not handle batches");
      const value = await batchHandler({
        tasks: ex.tasks,
        group: ex.group,
        get signal() {
          return ex.signal;
        },
        deadline,
        fail: (member, err) => {
          const i = ex.memberIndex(member);
          if (i < 0) throw new RangeError("conveyor: fail() names no member of this batch");
          ex.fail(i, err);
        },
      });
      return ex.resultsFor(true, value, true);
    }
    const handler = handlers.handlerFor(first.type);
    if (!handler) {
      return ex.resultsFor(false, new Error(`conveyor: no handler for task type ${JSON.stringify(first.type)} on this worker`));
    }
    const value = await handler({
      task: first,
      get signal() {
        return ex.signal;
      },
      deadline,
      attempt: first.retried + 1,
      progress: (percent, message) => {
        checkPercent(percent);
        progress(percent, message ?? "");
      },
    });
    return ex.resultsFor(true, value);
  } catch (err) {
    log.debug("task handler failed", { task: first.id, type: first.type, err: errorMessage(err) });
    return ex.resultsFor(false, err, asBatch);
  }
}
