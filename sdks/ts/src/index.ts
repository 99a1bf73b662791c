export * from "./errors.js";
export * from "./transport.js";
export { VERSION } from "./version.js";
export * from "./gen/conveyor/v1/task_pb.js";
export * from "./gen/conveyor/v1/worker_pb.js";
export * from "./gen/conveyor/v1/service_pb.js";
export * from "./gen/conveyor/v1/admin_pb.js";
export * from "./worker.js";
export {
  SkipRetry,
  WorkerShutdownError,
  TaskCanceledError,
  TaskDeadlineError,
  SessionLostError,
  isJSONContentType,
  type TaskContext,
  type Handler,
  type HandlerResult,
  type JSONHandler,
  type BatchContext,
  type BatchHandler,
} from "./handler.js";
export type { WorkerLogger } from "./logger.js";
export { reconnectDelay, DEFAULT_RECONNECT_BASE_MS, DEFAULT_RECONNECT_MAX_MS } from "./backoff.js";
