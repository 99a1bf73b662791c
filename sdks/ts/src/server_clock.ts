import type { Timestamp } from "@bufbuild/protobuf/wkt";
import type { TaskEnvelope } from "./gen/conveyor/v1/worker_pb.js";
import { durationMs, timestampMs } from "./execution.js";

/**
 * ServerClock estimates a session's server clock from the frames it
 * sends, so that a task's Deadline option (a time on the server's clock)
 * is reckoned on this worker's clock from the dispatch, not compared with
 * this worker's clock as it stands. A worker whose clock is ahead of the
 * server's by more than a task's time left would otherwise find the task
 * past its deadline on arrival, give it back unstarted, and have it sent
 * straight back until the server's clock caught up.
 *
 * A Dispatch's deadline (a BatchDispatch's too) is the earliest of the
 * lease's expiry (dispatch + lease_ttl), dispatch + Timeout and the
 * Deadline option (protocol §5.4). When the option did not set it, it
 * tells the dispatch time exactly, and with it the difference between the
 * clocks, which the session keeps. When the option did set it, the frame
 * tells only that the dispatch came at most lease_ttl (or Timeout) before
 * it, and the difference learned from earlier frames is used, this
 * worker's own clock standing in until one is learned.
 */
export class ServerClock {
  /** offset is this worker's clock less the server's (ms); undefined until learned. */
  private offset: number | undefined;

  constructor(private readonly leaseTtl: number) {}

  /** at is the server's clock (ms) when a frame carrying deadline for tasks arrived at received (ms, this worker's clock). */
  at(received: number, deadline: Timestamp | undefined, tasks: TaskEnvelope[]): number {
    const dl = timestampMs(deadline);
    if (dl === undefined) return this.now(received);
    let window = this.leaseTtl; // how long after the dispatch its deadline falls, unless an option set it
    let setByOption = false;
    for (const t of tasks) {
      const timeout = durationMs(t.options?.timeout);
      if (timeout > 0 && timeout < window) window = timeout;
      const own = timestampMs(t.options?.deadline);
      if (own !== undefined && dl >= own) setByOption = true;
    }
    const dispatched = dl - window; // exact, unless an option set the deadline
    if (!setByOption) {
      this.offset = received - dispatched;
      return dispatched;
    }
    return Math.max(this.now(received), dispatched);
  }

  /** now is the server's clock when this worker's reads local, by the difference learned, if any. */
  private now(local: number): number {
    return this.offset === undefined ? local : local - this.offset;
  }
}
