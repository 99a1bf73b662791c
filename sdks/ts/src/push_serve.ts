import { create, fromJson, toJsonString } from "@bufbuild/protobuf";
import { Execution, timestampMs } from "./execution.js";
import {
  PushRequestSchema,
  PushResponseSchema,
  TaskOutcome,
  type PushRequest,
} from "./gen/conveyor/v1/worker_pb.js";
import { TaskCanceledError, TaskDeadlineError, errorMessage } from "./handler.js";
import { invoke, type HandlerSet } from "./invoke.js";
import type { Log } from "./logger.js";
import { ReplayGuard } from "./push_replay.js";
import { checkHeaders, readTimestamp, signatureMatches, type Refusal, type SignedHeaders } from "./push_verify.js";

/** MAX_PUSH_BODY_BYTES bounds a push request's body (8 MiB); a longer one is refused with 413 unread. */
export const MAX_PUSH_BODY_BYTES = 8 << 20;

/** maxTimerMs is the longest delay setTimeout keeps (2^31-1 ms, about 24.8 days). */
const maxTimerMs = 2 ** 31 - 1;

/** PushCall is one HTTP request as a face (Node's or fetch's) gives it to PushCore. */
export interface PushCall {
  method: string | undefined;
  /** header is a request header's value (names lowercase); undefined if absent. */
  header(name: string): string | undefined;
  /** readBody reads the body; undefined if it is longer than limit bytes (the rest is left unread). */
  readBody(limit: number): Promise<Uint8Array | undefined>;
  /** closed aborts when the client goes away before the answer. */
  closed: AbortSignal;
}

/** PushReply is the answer a face writes: status, headers and body text. */
export interface PushReply {
  status: number;
  headers: Record<string, string>;
  body: string;
}

const textPlain = { "content-type": "text/plain; charset=utf-8" };
const utf8 = new TextDecoder("utf-8", { fatal: true });

/** refuse is the plain-text answer of a Refusal. */
function refuse(r: Refusal, extra: Record<string, string> = {}): PushReply {
  return { status: r.status, headers: { ...textPlain, ...extra }, body: `conveyor push: ${r.message}\n` };
}

/**
 * PushCore serves push requests whatever the HTTP face: it verifies the
 * request before it parses anything (method, body bound, signature under
 * any key, timestamp, replay), then runs the task's handler through invoke
 * (the code a Worker's sessions run it with) and answers the PushResponse.
 */
export class PushCore {
  private readonly replay: ReplayGuard;

  constructor(
    private readonly handlers: HandlerSet,
    private readonly keys: readonly Buffer[],
    private readonly toleranceMs: number,
    private readonly log: Log,
  ) {
    this.replay = new ReplayGuard(toleranceMs);
  }

  /** serve answers one request; it never rejects. */
  async serve(call: PushCall): Promise<PushReply> {
    try {
      const reply = await this.answer(call);
      if (reply.status !== 200) this.log.warn("push request refused", { status: reply.status, reason: reply.body.trim() });
      return reply;
    } catch (err) {
      this.log.error("push request failed", { err: errorMessage(err) });
      return refuse({ status: 500, message: `the push handler failed: ${errorMessage(err)}` });
    }
  }

  private async answer(call: PushCall): Promise<PushReply> {
    if (call.method !== "POST") {
      return refuse({ status: 405, message: `method ${call.method ?? "(none)"} is not allowed: push requests are POST` }, { allow: "POST" });
    }
    let signed: SignedHeaders | undefined;
    if (this.keys.length > 0) {
      const h = checkHeaders((n) => call.header(n), Date.now(), this.toleranceMs);
      if ("status" in h) return refuse(h);
      signed = h;
    }
    const length = call.header("content-length");
    if (length !== undefined && Number(length) > MAX_PUSH_BODY_BYTES) {
      return refuse(tooLarge(`${length} bytes`), { connection: "close" });
    }
    const body = await call.readBody(MAX_PUSH_BODY_BYTES);
    if (body === undefined) return refuse(tooLarge("longer"), { connection: "close" });
    if (signed) {
      const r = this.admit(signed, body);
      if (r) return refuse(r);
    }
    const req = parsePushRequest(body);
    if ("status" in req) return refuse(req);
    if (signed && req.attemptId !== signed.id) {
      return refuse({
        status: 400,
        message: `PushRequest.attempt_id ${JSON.stringify(req.attemptId)} is not the webhook-id ${JSON.stringify(signed.id)}`,
      });
    }
    return this.run(req, call);
  }

  /** admit checks the signature, then that the request is no replay. */
  private admit(h: SignedHeaders, body: Uint8Array): Refusal | undefined {
    if (!signatureMatches(this.keys, h, body)) {
      return { status: 401, message: "webhook-signature has no v1 signature of this request under any configured secret" };
    }
    switch (this.replay.admit(h.id, h.timestampMs, Date.now())) {
      case "replay":
        return { status: 409, message: `webhook-id ${JSON.stringify(h.id)} was accepted before: a replay` };
      case "forgotten":
        return {
          status: 401,
          message: `webhook-timestamp ${h.timestamp} is older than the replay memory reaches (it is full); the server retries with a new timestamp`,
        };
      default:
        return undefined;
    }
  }

  /**
   * run runs the handler with a signal that aborts at the request's
   * deadline (TaskDeadlineError) and when the client goes away
   * (TaskCanceledError: the server aborts its request at the deadline and
   * on CancelTask), and answers its outcome. The deadline is on the
   * server's clock; read against webhook-timestamp, it becomes the time
   * left from the receipt, so a clock ahead of the server's or behind it
   * does not move it (the timestamp's whole seconds can only make it
   * later, never earlier, than the server's own abort).
   */
  private async run(req: PushRequest, call: PushCall): Promise<PushReply> {
    const task = req.task;
    if (!task) return refuse({ status: 400, message: "the PushRequest has no task" });
    if (task.options?.atMostOnce) {
      // The server pushes none: a push cannot ask before it starts, and
      // an answer lost on the way back would leave the task run or not,
      // unknown. Should one come all the same, it goes back unrun (no
      // retry counted) for a worker session to run.
      this.log.warn("released a pushed at-most-once task without running it", { task: task.id, type: task.type });
      return answer({ outcome: TaskOutcome.RELEASED, errorMsg: PUSH_AT_MOST_ONCE, result: new Uint8Array(0) });
    }
    const received = Date.now();
    const bound = localDeadline(req, call, received, this.toleranceMs);
    const ex = new Execution([task], [req.attemptId || task.attemptId], false, "", bound);
    if (ex.bound !== undefined && ex.bound <= received) {
      return answer(ex.all(TaskOutcome.RETRY, "task deadline exceeded before the handler started")[0]);
    }
    const onClose = (): void =>
      ex.abort(new TaskCanceledError("conveyor: the push request was closed before its answer (canceled, or past its deadline)"));
    if (call.closed.aborted) onClose();
    else call.closed.addEventListener("abort", onClose, { once: true });
    if (ex.bound !== undefined) armDeadline(ex, ex.bound);
    try {
      // Progress has no channel over push: checked, then dropped.
      const rs = await invoke(this.handlers, ex, this.log, () => {});
      return answer(rs[0]);
    } finally {
      ex.clearTimers();
      call.closed.removeEventListener("abort", onClose);
    }
  }
}

/** PUSH_AT_MOST_ONCE is the error of a pushed at-most-once task, answered RELEASED. */
const PUSH_AT_MOST_ONCE =
  "push endpoints do not run at-most-once tasks: the start of such a task must be authorized over a worker session";

function tooLarge(what: string): Refusal {
  return { status: 413, message: `the body is ${what} than the ${MAX_PUSH_BODY_BYTES} bytes a push request may carry` };
}

/** parsePushRequest decodes the body as the proto3 JSON of a PushRequest, unknown fields ignored. */
function parsePushRequest(body: Uint8Array): PushRequest | Refusal {
  let json: unknown;
  try {
    json = JSON.parse(utf8.decode(body));
  } catch (err) {
    return { status: 400, message: `the body is not JSON: ${errorMessage(err)}` };
  }
  try {
    // JsonValue is what JSON.parse returns; the cast only names it.
    return fromJson(PushRequestSchema, json as Parameters<typeof fromJson>[1], { ignoreUnknownFields: true });
  } catch (err) {
    return { status: 400, message: `the body is not a PushRequest: ${errorMessage(err)}` };
  }
}

/**
 * localDeadline is PushRequest.deadline on this process's clock: as long
 * after the receipt as it is after webhook-timestamp, when that is present
 * and within the tolerance; else the deadline as it reads. Undefined when
 * the request has none (the task's own bounds then apply).
 */
function localDeadline(req: PushRequest, call: PushCall, received: number, toleranceMs: number): number | undefined {
  const deadline = timestampMs(req.deadline);
  if (deadline === undefined) return undefined;
  const sent = readTimestamp(call.header("webhook-timestamp"));
  if (sent === undefined || Math.abs(sent - received) > toleranceMs) return deadline;
  return received + (deadline - sent);
}

/** armDeadline aborts ex with TaskDeadlineError at bound, in steps setTimeout can hold. */
function armDeadline(ex: Execution, bound: number): void {
  const wait = Math.max(0, bound - Date.now());
  ex.boundTimer = setTimeout(() => {
    if (wait > maxTimerMs) armDeadline(ex, bound);
    else ex.abort(new TaskDeadlineError());
  }, Math.min(wait, maxTimerMs));
  ex.boundTimer.unref();
}

/** answer is the 200 reply carrying a Result as a PushResponse. */
function answer(r: { outcome: TaskOutcome; errorMsg: string; result: Uint8Array } | undefined): PushReply {
  const res = create(PushResponseSchema, {
    outcome: r?.outcome ?? TaskOutcome.RETRY,
    errorMsg: r ? r.errorMsg : "conveyor: the handler gave no result",
    result: r?.result ?? new Uint8Array(0),
  });
  return { status: 200, headers: { "content-type": "application/json" }, body: toJsonString(PushResponseSchema, res) };
}
