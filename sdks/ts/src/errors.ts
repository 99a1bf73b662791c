import { Code, ConnectError } from "@connectrpc/connect";

/**
 * The Connect code names this SDK reports, as the protocol spells them
 * (`invalid_argument`, `already_exists`, ...).
 */
export type CodeName =
  | "canceled"
  | "unknown"
  | "invalid_argument"
  | "deadline_exceeded"
  | "not_found"
  | "already_exists"
  | "permission_denied"
  | "resource_exhausted"
  | "failed_precondition"
  | "aborted"
  | "out_of_range"
  | "unimplemented"
  | "internal"
  | "unavailable"
  | "data_loss"
  | "unauthenticated";

const names: Record<Code, CodeName> = {
  [Code.Canceled]: "canceled",
  [Code.Unknown]: "unknown",
  [Code.InvalidArgument]: "invalid_argument",
  [Code.DeadlineExceeded]: "deadline_exceeded",
  [Code.NotFound]: "not_found",
  [Code.AlreadyExists]: "already_exists",
  [Code.PermissionDenied]: "permission_denied",
  [Code.ResourceExhausted]: "resource_exhausted",
  [Code.FailedPrecondition]: "failed_precondition",
  [Code.Aborted]: "aborted",
  [Code.OutOfRange]: "out_of_range",
  [Code.Unimplemented]: "unimplemented",
  [Code.Internal]: "internal",
  [Code.Unavailable]: "unavailable",
  [Code.DataLoss]: "data_loss",
  [Code.Unauthenticated]: "unauthenticated",
};

const codes = new Map<string, Code>(Object.entries(names).map(([code, name]) => [name, Number(code) as Code]));

/**
 * codeOf returns the Connect code the protocol spells name (as
 * BatchTaskResult.code does); Code.Unknown for a name it does not know.
 */
export function codeOf(name: string): Code {
  return codes.get(name) ?? Code.Unknown;
}

/** codeName returns the protocol's name of a Connect code. */
export function codeName(code: Code): CodeName {
  return names[code] ?? "unknown";
}

/**
 * ConveyorError is every error the SDK returns from a call to the server:
 * its `code` is the Connect code's name and its message the server's.
 * The subclasses let callers branch with `instanceof`.
 */
export class ConveyorError extends Error {
  /** The Connect code's name, e.g. `already_exists`. */
  readonly code: CodeName;
  /** The ConnectError this was made from, when there was one. */
  override readonly cause: unknown;

  constructor(code: CodeName, message: string, cause?: unknown) {
    super(message);
    this.name = new.target.name;
    this.code = code;
    this.cause = cause;
  }
}

/** The request or frame broke the protocol's rules; not retryable as is. */
export class InvalidArgumentError extends ConveyorError {}
/** An enqueue hit a stored task id or an active unique key. */
export class AlreadyExistsError extends ConveyorError {}
/** The task, queue or cron entry named does not exist. */
export class NotFoundError extends ConveyorError {}
/** The bearer token is missing or wrong. */
export class UnauthenticatedError extends ConveyorError {}
/** The token does not allow the call. */
export class PermissionDeniedError extends ConveyorError {}
/** A bound was reached (a full queue, a rate); retry later. */
export class ResourceExhaustedError extends ConveyorError {}
/** The call does not fit the current state (e.g. a task not in a state the action needs). */
export class FailedPreconditionError extends ConveyorError {}
/** The server could not act now (shutting down, storage unreachable); retryable. */
export class UnavailableError extends ConveyorError {}
/** The call's deadline passed before it finished. */
export class DeadlineExceededError extends ConveyorError {}
/** The call was canceled (its AbortSignal fired). */
export class CanceledError extends ConveyorError {}
/** The server failed (storage, a bug). */
export class InternalError extends ConveyorError {}

type ErrorClass = new (code: CodeName, message: string, cause?: unknown) => ConveyorError;

const classes: Partial<Record<Code, ErrorClass>> = {
  [Code.InvalidArgument]: InvalidArgumentError,
  [Code.AlreadyExists]: AlreadyExistsError,
  [Code.NotFound]: NotFoundError,
  [Code.Unauthenticated]: UnauthenticatedError,
  [Code.PermissionDenied]: PermissionDeniedError,
  [Code.ResourceExhausted]: ResourceExhaustedError,
  [Code.FailedPrecondition]: FailedPreconditionError,
  [Code.Unavailable]: UnavailableError,
  [Code.DeadlineExceeded]: DeadlineExceededError,
  [Code.Canceled]: CanceledError,
  [Code.Internal]: InternalError,
};

/** errorFor makes the typed error of a code, with a message. */
export function errorFor(code: Code, message: string, cause?: unknown): ConveyorError {
  const cls = classes[code] ?? ConveyorError;
  return new cls(codeName(code), message, cause);
}

/**
 * toConveyorError converts whatever a call threw into a ConveyorError of
 * the matching class; a ConveyorError is returned as is.
 */
export function toConveyorError(err: unknown): ConveyorError {
  if (err instanceof ConveyorError) return err;
  const ce = ConnectError.from(err);
  return errorFor(ce.code, ce.rawMessage, err);
}

/**
 * abortError is the error of a call whose signal fired: DeadlineExceededError
 * when its reason is a timeout (AbortSignal.timeout), else CanceledError.
 */
export function abortError(signal: AbortSignal): ConveyorError {
  const reason: unknown = signal.reason;
  const timeout = reason instanceof Error && reason.name === "TimeoutError";
  const why = reason instanceof Error ? reason.message : "the call's signal was aborted";
  return errorFor(timeout ? Code.DeadlineExceeded : Code.Canceled, `conveyor: ${why}`, reason);
}

/** callError is the error of a failed call: its abort's when signal fired. */
export function callError(err: unknown, signal: AbortSignal | undefined): ConveyorError {
  if (signal?.aborted) return abortError(signal);
  return toConveyorError(err);
}
