import type { IncomingMessage, ServerResponse } from "node:http";
import type { Http2ServerRequest, Http2ServerResponse } from "node:http2";
import type { Readable } from "node:stream";
import { toLog, type WorkerLogger } from "./logger.js";
import { PushCore, type PushCall, type PushReply } from "./push_serve.js";
import { parsePushSecret } from "./push_verify.js";
import type { Worker } from "./worker.js";

/** PUSH_SECRET_ENV names the environment variable read for secrets when none are given: comma-separated `whsec_` secrets. */
export const PUSH_SECRET_ENV = "CONVEYOR_PUSH_SECRET";
/**
 * DEFAULT_PUSH_TOLERANCE_MS is how far webhook-timestamp may be from this
 * process's clock, either way, unless set: 5 minutes, as Standard Webhooks
 * advises (room for clock skew, little for a replay).
 */
export const DEFAULT_PUSH_TOLERANCE_MS = 5 * 60_000;

/** PushHandlerOptions configure createPushHandler. */
export interface PushHandlerOptions {
  /**
   * The secrets the server signs with, each `whsec_<base64 of a 24..64
   * byte key>`, as given to `conveyor server --push-secret`. A request is
   * accepted when it is signed under any of them, so a rotation lists the
   * old and the new. Default: the comma-separated CONVEYOR_PUSH_SECRET
   * (where `process` exists).
   */
  secrets?: string[];
  /**
   * Accept unsigned requests when no secret is configured, as a server
   * with no --push-secret sends them (to loopback URLs only). Default
   * false: with no secret, createPushHandler throws rather than serve
   * anyone who can reach it. It never turns off the check of a configured
   * secret.
   */
  developmentMode?: boolean;
  /**
   * How far webhook-timestamp may be from this process's clock, either
   * way, in milliseconds; webhook-ids are remembered as long, to refuse
   * replays. Default DEFAULT_PUSH_TOLERANCE_MS (5 minutes).
   */
  toleranceMs?: number;
  /** Receives the handler's log records (refused requests, handler failures); silent unless set. */
  logger?: WorkerLogger;
}

/**
 * PushHandler serves a Worker's handlers to a Conveyor server's push
 * requests (a queue's QueueConfig.push endpoint), through either of two
 * faces over one state (secrets, replay memory).
 */
export interface PushHandler {
  /**
   * node is a request listener for node:http, node:https and node:http2's
   * compatibility API, and an Express or Connect route handler:
   * `http.createServer(push.node)`, `app.post("/conveyor", push.node)`.
   * It reads the raw body itself, so mount it before any JSON body parser
   * (or behind `express.raw({ type: "application/json" })`, whose Buffer it
   * uses). It never rejects.
   */
  node(req: IncomingMessage | Http2ServerRequest, res: ServerResponse | Http2ServerResponse): Promise<void>;
  /**
   * fetch answers a fetch-API Request, for runtimes whose handlers take a
   * Request and return a Response (Vercel functions, Cloudflare Workers
   * with nodejs_compat, Deno, Bun, Lambda function URLs through an
   * adapter). The request's signal aborts the handler when the runtime
   * reports the client gone. It never rejects.
   */
  fetch(request: Request): Promise<Response>;
}

/**
 * createPushHandler serves the handlers registered on worker (handle,
 * handleJSON, handleBatch) to push requests, mapping their outcomes as the
 * Worker's sessions do: a return is SUCCESS with the result, SkipRetry is
 * SKIP_RETRY, any other throw RETRY with its message, a type with no
 * handler RETRY, a type with only a batch handler runs as a batch of one.
 * It does not start the Worker's session: a Worker made for push alone
 * needs no server URL.
 *
 * Each request is checked before its body is parsed: POST only (else
 * 405), a body of at most MAX_PUSH_BODY_BYTES (else 413), the
 * webhook-id, webhook-timestamp and webhook-signature headers (else 401),
 * a timestamp within toleranceMs (else 401), a v1 signature under one of
 * the secrets (else 401), a webhook-id not accepted before (else 409),
 * then a PushRequest body (else 400) whose attempt_id is the webhook-id
 * (else 400). Refusals are plain text naming what is wrong.
 *
 * The handler's signal aborts at PushRequest.deadline (TaskDeadlineError)
 * and when the server closes the request (TaskCanceledError). The answer
 * is 200 with the PushResponse as JSON. Progress has no channel over
 * push: ctx.progress checks its arguments and records nothing. Requests
 * run as they come; the endpoint's concurrency (QueueConfig.push) is the
 * bound.
 *
 * It throws a TypeError if a secret is not `whsec_<base64>` of a 24..64
 * byte key (naming which: secrets[i] or CONVEYOR_PUSH_SECRET entry i,
 * never its text), or if there is no secret and developmentMode is not
 * set.
 */
export function createPushHandler(worker: Worker, options: PushHandlerOptions = {}): PushHandler {
  const keys = secretKeys(options.secrets);
  if (keys.length === 0 && !options.developmentMode) {
    throw new TypeError(
      `conveyor: a push handler needs a secret (options.secrets or ${PUSH_SECRET_ENV}) to verify requests; set developmentMode to accept unsigned ones from a server with no --push-secret`,
    );
  }
  const toleranceMs = options.toleranceMs ?? DEFAULT_PUSH_TOLERANCE_MS;
  if (!Number.isFinite(toleranceMs) || toleranceMs <= 0) {
    throw new TypeError(`conveyor: push toleranceMs must be a positive number of milliseconds, got ${toleranceMs}`);
  }
  const log = toLog(options.logger);
  if (keys.length === 0) log.warn("push handler in development mode: requests are not verified");
  const core = new PushCore(worker, keys, toleranceMs, log);
  return {
    node: (req, res) => serveNode(core, req, res),
    fetch: (request) => serveFetch(core, request),
  };
}

/** secretKeys parses the given secrets, or those of PUSH_SECRET_ENV when none are given. */
function secretKeys(secrets: string[] | undefined): Buffer[] {
  if (secrets !== undefined && secrets.length > 0) {
    return secrets.map((s, i) => parsePushSecret(s, `secrets[${i}]`));
  }
  const env = typeof process === "undefined" ? undefined : process.env[PUSH_SECRET_ENV];
  if (!env) return [];
  const keys: Buffer[] = [];
  env.split(",").forEach((s, i) => {
    if (s.trim() !== "") keys.push(parsePushSecret(s.trim(), `${PUSH_SECRET_ENV} entry ${i + 1}`));
  });
  return keys;
}

/** NodeResponse is what serveNode uses of an http or http2 response. */
interface NodeResponse {
  writeHead(status: number, headers: Record<string, string>): unknown;
  end(body: string): unknown;
  once(event: "close", listener: () => void): unknown;
  readonly writableFinished: boolean;
  readonly headersSent: boolean;
  readonly destroyed: boolean;
}

async function serveNode(
  core: PushCore,
  req: IncomingMessage | Http2ServerRequest,
  response: ServerResponse | Http2ServerResponse,
): Promise<void> {
  const res: NodeResponse = response;
  const closed = new AbortController();
  res.once("close", () => {
    if (!res.writableFinished) closed.abort();
  });
  const call: PushCall = {
    method: req.method,
    header: (name) => {
      const v = req.headers[name];
      return Array.isArray(v) ? v.join(", ") : v;
    },
    readBody: (limit) => nodeBody(req, limit),
    closed: closed.signal,
  };
  const reply = await core.serve(call);
  if (res.headersSent || res.destroyed || closed.signal.aborted) return;
  const headers = { ...reply.headers };
  // HTTP/2 has no Connection header (Node throws on one); it closes the stream alone.
  if (req.httpVersionMajor !== 1) delete headers.connection;
  try {
    res.writeHead(reply.status, headers);
    res.end(reply.body);
  } catch {
    // The client went away between the check and the write: nobody to answer.
  }
}

/**
 * nodeBody reads a Node request's body, up to limit bytes: undefined past
 * that (the stream is paused, the rest unread). A Buffer an earlier body
 * parser left in req.body (express.raw) is used instead; a body a JSON
 * parser consumed cannot be verified, and is an error saying so.
 */
function nodeBody(req: IncomingMessage | Http2ServerRequest, limit: number): Promise<Uint8Array | undefined> {
  const parsed = (req as { body?: unknown }).body;
  if (parsed instanceof Uint8Array) return Promise.resolve(parsed.length > limit ? undefined : parsed);
  const stream: Readable = req;
  if (stream.readableEnded) {
    return Promise.reject(
      new Error("the request body was read before the push handler (a body parser?): mount it before express.json(), or behind express.raw()"),
    );
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let n = 0;
    const done = (): void => {
      stream.off("data", onData);
      stream.off("end", onEnd);
      stream.off("error", onError);
      stream.off("close", onClose);
    };
    const onData = (chunk: Buffer | string): void => {
      const b = typeof chunk === "string" ? Buffer.from(chunk) : chunk;
      n += b.length;
      if (n > limit) {
        done();
        stream.pause();
        resolve(undefined);
        return;
      }
      chunks.push(b);
    };
    const onEnd = (): void => {
      done();
      resolve(Buffer.concat(chunks, n));
    };
    const onError = (err: Error): void => {
      done();
      reject(err);
    };
    const onClose = (): void => {
      done();
      reject(new Error("the request closed before its body ended"));
    };
    stream.on("data", onData);
    stream.on("end", onEnd);
    stream.on("error", onError);
    stream.on("close", onClose);
  });
}

async function serveFetch(core: PushCore, request: Request): Promise<Response> {
  const call: PushCall = {
    method: request.method,
    header: (name) => request.headers.get(name) ?? undefined,
    readBody: (limit) => streamBody(request.body, limit),
    closed: request.signal,
  };
  const reply: PushReply = await core.serve(call);
  const headers = { ...reply.headers };
  delete headers.connection; // the runtime owns the connection
  return new Response(reply.body, { status: reply.status, headers });
}

/** streamBody reads a fetch body up to limit bytes: undefined past that (the stream is canceled). */
async function streamBody(body: ReadableStream<Uint8Array> | null, limit: number): Promise<Uint8Array | undefined> {
  if (!body) return new Uint8Array(0);
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let n = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    n += value.length;
    if (n > limit) {
      await reader.cancel().catch(() => {});
      return undefined;
    }
    chunks.push(value);
  }
  const out = new Uint8Array(n);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}
