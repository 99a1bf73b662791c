import type { WorkerMessage } from "./gen/conveyor/v1/worker_pb.js";

/**
 * Outbox is the request side of a worker session: an async iterable the
 * transport reads frames from, in the order they were pushed. close() ends
 * it (the request side closes once every pushed frame has been sent).
 */
export class Outbox implements AsyncIterable<WorkerMessage> {
  private readonly queue: WorkerMessage[] = [];
  private waiter: ((r: IteratorResult<WorkerMessage>) => void) | undefined;
  private closed = false;

  /** push queues one frame; a frame pushed after close is dropped. */
  push(msg: WorkerMessage): void {
    if (this.closed) return;
    const w = this.waiter;
    if (w) {
      this.waiter = undefined;
      w({ value: msg, done: false });
      return;
    }
    this.queue.push(msg);
  }

  /** close ends the request side after the frames already queued. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    const w = this.waiter;
    if (w && this.queue.length === 0) {
      this.waiter = undefined;
      w({ value: undefined, done: true });
    }
  }

  [Symbol.asyncIterator](): AsyncIterator<WorkerMessage> {
    return {
      next: () => {
        const msg = this.queue.shift();
        if (msg) return Promise.resolve({ value: msg, done: false });
        if (this.closed) return Promise.resolve({ value: undefined, done: true });
        return new Promise((resolve) => {
          this.waiter = resolve;
        });
      },
      return: () => {
        this.closed = true;
        this.queue.length = 0;
        return Promise.resolve({ value: undefined, done: true });
      },
      // The transport ends the request side with throw() when the call
      // fails; there is nothing left to send then.
      throw: (err?: unknown) => {
        this.closed = true;
        this.queue.length = 0;
        return Promise.reject(err instanceof Error ? err : new Error(String(err)));
      },
    };
  }
}
