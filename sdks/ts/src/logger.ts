/**
 * Logger receives the SDK's log records: a message and structured
 * attributes. console satisfies it; the default logs nothing, since a
 * library must not write to the process's output on its own.
 */
export interface Logger {
  debug(msg: string, attrs?: Record<string, unknown>): void;
  info(msg: string, attrs?: Record<string, unknown>): void;
  warn(msg: string, attrs?: Record<string, unknown>): void;
  error(msg: string, attrs?: Record<string, unknown>): void;
}

const nop = (): void => {};

/** silentLogger discards every record; the default. */
export const silentLogger: Logger = { debug: nop, info: nop, warn: nop, error: nop };
