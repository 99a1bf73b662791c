/**
 * WorkerLogger receives the Worker's log records: a message and
 * structured attributes. Every method is optional (console satisfies it);
 * the default logs nothing, since a library must not write to the
 * process's output on its own.
 */
export interface WorkerLogger {
  debug?(msg: string, attrs?: Record<string, unknown>): void;
  info?(msg: string, attrs?: Record<string, unknown>): void;
  warn?(msg: string, attrs?: Record<string, unknown>): void;
  error?(msg: string, attrs?: Record<string, unknown>): void;
}

/** Log is a WorkerLogger with every method present. */
export interface Log {
  debug(msg: string, attrs?: Record<string, unknown>): void;
  info(msg: string, attrs?: Record<string, unknown>): void;
  warn(msg: string, attrs?: Record<string, unknown>): void;
  error(msg: string, attrs?: Record<string, unknown>): void;
}

const nop = (): void => {};

/** toLog fills the methods a WorkerLogger leaves out with no-ops; none logs nothing. */
export function toLog(l: WorkerLogger | undefined): Log {
  const bind = (f: WorkerLogger["info"]): Log["info"] => (f ? f.bind(l) : nop);
  return { debug: bind(l?.debug), info: bind(l?.info), warn: bind(l?.warn), error: bind(l?.error) };
}
