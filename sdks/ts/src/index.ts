export * from "./errors.js";
export * from "./transport.js";
export { VERSION } from "./version.js";
export * from "./gen/conveyor/v1/task_pb.js";
export * from "./gen/conveyor/v1/worker_pb.js";
export * from "./gen/conveyor/v1/service_pb.js";
export * from "./gen/conveyor/v1/admin_pb.js";
