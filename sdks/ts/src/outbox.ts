import type { WorkerMessage } from "./gen/conveyor/v1/worker_pb.js";

/**
 * Outbox is the request side of a worker session, as a Session sees it:
 * frames pushed are sent in the order pushed; close() ends the request
 * side once every frame pushed has been sent. A frame pushed after close
 * is dropped. written, when given, is called once the frame has been
 * written to the connection (never, if it could not be). SessionStream is
 * the one a worker's session writes to.
 */
export interface Outbox {
  push(msg: WorkerMessage, written?: () => void): void;
  close(): void;
}
