import { Code } from "@connectrpc/connect";
import type { AdminClient } from "./admin.js";
import type { TaskClient } from "./batcher.js";
import { callError, errorFor } from "./errors.js";
import { MAX_INT32 } from "./task_options.js";

/**
 * InspectorRpc is what the Inspector's calls are made on: the
 * AdminService, and the TaskService for getTask, over one transport.
 */
export interface InspectorRpc {
  admin: AdminClient;
  tasks: TaskClient;
}

/**
 * rpc runs one call and throws its failure as a ConveyorError of the class
 * of its code, as the Client does: the abort's (CanceledError, or
 * DeadlineExceededError for an AbortSignal.timeout) when signal fired.
 */
export async function rpc<T>(signal: AbortSignal | undefined, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    throw callError(err, signal);
  }
}

/** invalid throws the InvalidArgumentError of a value the SDK refuses before any call. */
export function invalid(message: string): never {
  throw errorFor(Code.InvalidArgument, `conveyor: ${message}`);
}

/**
 * checkInt32 refuses a value the wire's int32 field cannot carry: sent, it
 * would wrap into another value (or fail to encode) rather than be
 * refused as the out-of-range value it is.
 */
export function checkInt32(field: string, value: number, min = 0): void {
  if (!Number.isInteger(value) || value < min || value > MAX_INT32) {
    invalid(`${field} must be an integer in ${min}..${MAX_INT32}, got ${value}`);
  }
}
