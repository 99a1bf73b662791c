export * from "./errors.js";
export * from "./transport.js";
export { VERSION } from "./version.js";
export * from "./gen/conveyor/v1/task_pb.js";
export * from "./gen/conveyor/v1/worker_pb.js";
export * from "./gen/conveyor/v1/service_pb.js";
export * from "./gen/conveyor/v1/admin_pb.js";
export * from "./client.js";
export {
  type Dependency,
  type EnqueueItem,
  type EnqueueOptions,
  type RetryPolicyOptions,
  MAX_BATCH_ITEMS,
  MAX_DEPENDENCIES,
  MAX_METADATA_BYTES,
  MAX_METADATA_ENTRIES,
  MAX_NAME_BYTES,
  MAX_PAYLOAD_BYTES,
} from "./task_options.js";
export { DEFAULT_ENQUEUE_IN_FLIGHT } from "./batcher.js";
export * from "./admin.js";
export { Inspector } from "./inspector.js";
export type { AllTasksOptions, ListTasksOptions, TaskActionResult, TaskPage } from "./inspector_tasks.js";
export type { BulkTasksCallOptions, BulkTasksOptions } from "./inspector_bulk.js";
export type { GroupPolicyInput, PushEndpointInput, QueueConfigInput, QueueSetting, RateLimitInput } from "./inspector_queues.js";
export type { CronEntryInput, CronEntryUpdate, CronField, CronTaskOptions } from "./inspector_cron.js";
export type { BrokerInfo, ClusterInfo } from "./inspector_cluster.js";
export * from "./json.js";
export * from "./worker.js";
export type { PeriodicJob } from "./periodic.js";
export {
  SkipRetry,
  WorkerShutdownError,
  TaskCanceledError,
  TaskDeadlineError,
  LeaseLapsedError,
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
export {
  createPushHandler,
  DEFAULT_PUSH_TOLERANCE_MS,
  PUSH_SECRET_ENV,
  type PushHandler,
  type PushHandlerOptions,
} from "./push.js";
export { MAX_PUSH_BODY_BYTES } from "./push_serve.js";
export { MAX_REPLAY_IDS } from "./push_replay.js";
