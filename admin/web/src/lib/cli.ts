// Commands the empty states offer to copy, aimed at the server that served
// the page: the CLI and the example worker both read CONVEYOR_ADDR, so a
// server elsewhere than the default address gets it set in front.
import { authState } from "./auth";

/** DEFAULT_ADDR is the address the CLI and the SDKs use when none is given. */
export const DEFAULT_ADDR = "http://127.0.0.1:7420";

/**
 * command is cmd as it should be typed to reach this server: with
 * CONVEYOR_ADDR set when the page's origin is not the default address. The
 * token is never part of it (a command is shown and copied); a server with
 * a token says so beside it (see needsToken).
 */
export function command(cmd: string, origin: string = location.origin): string {
  return origin === DEFAULT_ADDR ? cmd : `CONVEYOR_ADDR=${origin} ${cmd}`;
}

/** needsToken reports whether the server asks for a token, which a command needs in CONVEYOR_TOKEN. */
export function needsToken(): boolean {
  const a = authState.get();
  return a.status === "ready" && a.withToken;
}

/** ENQUEUE_EXAMPLE enqueues one task, creating the queue default. */
export const ENQUEUE_EXAMPLE = `conveyor enqueue email:send '{"to":"a@b.c"}'`;

/** WORKER_EXAMPLE runs the Go SDK's example worker (serving default) from a checkout. */
export const WORKER_EXAMPLE = "go run ./sdks/go/examples/worker";
