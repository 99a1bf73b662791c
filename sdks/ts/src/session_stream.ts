import * as http2 from "node:http2";
import { fromBinary, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Http2SessionManager } from "@connectrpc/connect-node";
import * as connectProtocol from "@connectrpc/connect/protocol-connect";
import * as grpcProtocol from "@connectrpc/connect/protocol-grpc";
import { WorkerService } from "./gen/conveyor/v1/service_pb.js";
import {
  ServerMessageSchema,
  WorkerMessageSchema,
  type ServerMessage,
  type WorkerMessage,
} from "./gen/conveyor/v1/worker_pb.js";
import type { Outbox } from "./outbox.js";
import { createSessionManager, type ConnectionOptions, type Protocol } from "./transport.js";

/**
 * The worker's session is the one call this SDK makes on an HTTP/2
 * stream of its own rather than through a Connect client. Connect's
 * streaming client hands each message through a chain of async
 * iterables, and writes one message at a time, waiting for each write to
 * finish before it takes the next: a worker draining no-op tasks ran at a
 * third of the Go SDK's rate, most of its time in that chain, while the
 * same frames read and written straight on the stream ran three times as
 * fast (docs/benchmarks.md, "The TypeScript worker's session on its own
 * stream"). Everything else is Connect's: the HTTP/2 connection and its
 * keepalive pings (Http2SessionManager), the protocols' headers and the
 * errors they carry (@connectrpc/connect's protocol-grpc and
 * protocol-connect, internal modules of the pinned version), and
 * protobuf-es for every message.
 */

/** sessionPath is the Session method's HTTP path. */
const sessionPath = `/${WorkerService.typeName}/${WorkerService.method.session.name}`;
/** envelopeHeader is the length of a message's header: flags and a 32-bit length. */
const envelopeHeader = 5;
/** compressedFlag marks a compressed message; the session accepts none. */
const compressedFlag = 0b01;

/**
 * SessionDialer opens Session calls to one server over one HTTP/2
 * connection, kept alive with pings and redialed when a call finds it
 * gone.
 */
export class SessionDialer {
  private readonly manager: Http2SessionManager;
  private readonly protocol: Protocol;
  private readonly token: string | undefined;

  /** The constructor throws a TypeError for a bad URL or protocol. */
  constructor(opts: ConnectionOptions) {
    const protocol = opts.protocol ?? "grpc";
    if (protocol !== "grpc" && protocol !== "connect") {
      throw new TypeError(`conveyor: protocol ${JSON.stringify(protocol)} is not grpc or connect`);
    }
    this.protocol = protocol;
    this.token = opts.token || undefined;
    this.manager = createSessionManager(opts);
  }

  /** open starts a Session call; signal cuts it (reads then reject with its reason). */
  open(signal: AbortSignal): SessionStream {
    return new SessionStream(this.manager, this.protocol, this.requestHeaders(), signal);
  }

  /** close closes the connection, and with it any call still open. */
  close(): void {
    this.manager.abort();
  }

  private requestHeaders(): http2.OutgoingHttpHeaders {
    const user = this.token ? { authorization: `Bearer ${this.token}` } : undefined;
    const h = this.protocol === "grpc"
      ? grpcProtocol.requestHeader(true, undefined, user)
      : connectProtocol.requestHeader("bidi_streaming", true, undefined, user, true);
    const out: http2.OutgoingHttpHeaders = {};
    h.forEach((value, key) => {
      out[key] = value;
    });
    return out;
  }
}

/**
 * SessionStream is one Session call. Frames sent are serialized at once
 * and written together: every frame queued while a write is under way,
 * or in the same turn of the event loop, goes in the next one. Frames
 * received are parsed as their bytes arrive, and read() hands over all
 * those parsed so far.
 */
export class SessionStream implements Outbox {
  private stream: http2.ClientHttp2Stream | undefined;
  private readonly pending: Uint8Array[] = [];
  /** onWritten are the written callbacks of the frames in pending. */
  private onWritten: (() => void)[] = [];
  private writing = false;
  private flushQueued = false;
  private sendClosed = false;
  private sendEnded = false;

  private inbox: ServerMessage[] = [];
  private reader: { resolve: (b: ServerMessage[] | undefined) => void; reject: (e: unknown) => void } | undefined;
  private failure: Error | undefined;
  private finished = false;
  /** parts hold received bytes not yet parsed, partsLength their length. */
  private parts: Buffer[] = [];
  private partsLength = 0;
  /** need is the length of the first message not yet parsed, with its header; 0 until its header is in. */
  private need = 0;
  private header: Headers | undefined;
  private trailer = new Headers();
  private endStreamSeen = false;

  constructor(
    private readonly manager: Http2SessionManager,
    private readonly protocol: Protocol,
    headers: http2.OutgoingHttpHeaders,
    private readonly signal: AbortSignal,
  ) {
    if (signal.aborted) {
      this.fail(abortReason(signal));
      return;
    }
    signal.addEventListener("abort", this.onAbort, { once: true });
    manager.request("POST", sessionPath, headers, {}).then(
      (stream) => this.attach(stream),
      (err: unknown) => this.fail(nodeError(err)),
    );
  }

  /**
   * push queues one frame; a frame pushed after close() is dropped.
   * written is called once the frame has been written to the connection.
   */
  push(msg: WorkerMessage, written?: () => void): void {
    if (this.sendClosed || this.finished) return;
    const body = toBinary(WorkerMessageSchema, msg);
    const env = new Uint8Array(envelopeHeader + body.length);
    new DataView(env.buffer).setUint32(1, body.length);
    env.set(body, envelopeHeader);
    this.pending.push(env);
    if (written) this.onWritten.push(written);
    this.queueFlush();
  }

  /** close ends the request side once every frame queued has been written. */
  close(): void {
    if (this.sendClosed) return;
    this.sendClosed = true;
    this.queueFlush();
  }

  /**
   * read resolves with every frame received since the last read (at least
   * one), or undefined once the server ended the call cleanly; it rejects
   * with the call's error once the frames before it have been read.
   */
  read(): Promise<ServerMessage[] | undefined> {
    if (this.inbox.length > 0) {
      const batch = this.inbox;
      this.inbox = [];
      return Promise.resolve(batch);
    }
    if (this.failure) return Promise.reject(this.failure);
    if (this.finished) return Promise.resolve(undefined);
    return new Promise((resolve, reject) => {
      this.reader = { resolve, reject };
    });
  }

  private readonly onAbort = (): void => {
    this.fail(abortReason(this.signal));
  };

  private attach(stream: http2.ClientHttp2Stream): void {
    if (this.finished) {
      stream.close(http2.constants.NGHTTP2_CANCEL);
      return;
    }
    this.stream = stream;
    stream.on("response", (headers) => this.onResponse(headers));
    stream.on("data", (chunk: Buffer) => this.onData(chunk));
    stream.on("trailers", (headers) => {
      this.trailer = webHeaders(headers);
    });
    stream.on("end", () => this.onEnd());
    stream.on("error", (err: Error) => this.fail(resetError(stream.rstCode) ?? nodeError(err)));
    stream.on("close", () => {
      this.fail(resetError(stream.rstCode) ?? new ConnectError("the session's HTTP/2 stream closed", Code.Unavailable));
    });
    this.queueFlush();
  }

  private queueFlush(): void {
    if (this.writing || this.flushQueued) return;
    this.flushQueued = true;
    setImmediate(this.flush);
  }

  /** flush writes every frame pending in one write, or ends the request side once none is left after close(). */
  private readonly flush = (): void => {
    this.flushQueued = false;
    const stream = this.stream;
    if (!stream || this.finished || this.writing) return;
    if (this.pending.length === 0) {
      if (this.sendClosed && !this.sendEnded) {
        this.sendEnded = true;
        stream.end();
      }
      return;
    }
    const chunk = this.pending.length === 1 ? (this.pending[0] as Uint8Array) : Buffer.concat(this.pending);
    this.pending.length = 0;
    const written = this.onWritten;
    this.onWritten = [];
    this.writing = true;
    stream.write(chunk, (err) => {
      this.writing = false;
      if (err) return; // it reaches the stream's error event
      for (const fn of written) fn();
      this.flush();
    });
  };

  private onResponse(headers: http2.IncomingHttpHeaders & http2.IncomingHttpStatusHeader): void {
    const status = headers[":status"] ?? 0;
    const header = webHeaders(headers);
    this.header = header;
    try {
      if (this.protocol === "grpc") {
        const { foundStatus, headerError } = grpcProtocol.validateResponse(status, header);
        if (headerError) throw headerError;
        if (foundStatus) this.finish(); // trailers-only: an OK status and no messages
      } else {
        connectProtocol.validateResponse("bidi_streaming", true, status, header);
      }
    } catch (err) {
      this.fail(err instanceof Error ? err : new ConnectError(String(err), Code.Internal));
    }
  }

  private onData(chunk: Buffer): void {
    if (this.finished) return;
    if (this.stream) this.manager.notifyResponseByteRead(this.stream);
    this.parts.push(chunk);
    this.partsLength += chunk.length;
    const received = this.inbox.length;
    try {
      this.parse();
    } catch (err) {
      this.fail(err instanceof Error ? err : new ConnectError(String(err), Code.Internal));
      return;
    }
    if (this.inbox.length > received) this.wake();
  }

  /**
   * parse takes every whole message out of the received bytes. The bytes
   * are joined only once the first message is whole (its length known
   * from its header), so a large message arriving in many chunks is
   * copied once, not once a chunk; the messages after it in the joined
   * bytes are views of them, never copied again.
   */
  private parse(): void {
    while (!this.finished && this.partsLength >= envelopeHeader) {
      if (this.need === 0) {
        if ((this.parts[0] as Buffer).length < envelopeHeader) this.joined();
        this.need = envelopeHeader + (this.parts[0] as Buffer).readUInt32BE(1);
      }
      if (this.partsLength < this.need) return;
      const buf = this.joined();
      // A plain Uint8Array view, not a Buffer: the bytes fields of the
      // messages parsed from it (payloads) are views of it, and a
      // handler gets the type the SDK declares.
      const body = new Uint8Array(buf.buffer, buf.byteOffset + envelopeHeader, this.need - envelopeHeader);
      const rest = buf.subarray(this.need);
      this.parts = rest.length > 0 ? [rest] : [];
      this.partsLength = rest.length;
      this.need = 0;
      this.message(buf[0] as number, body);
    }
  }

  /** joined makes the received bytes one buffer. */
  private joined(): Buffer {
    if (this.parts.length > 1) this.parts = [Buffer.concat(this.parts, this.partsLength)];
    return this.parts[0] as Buffer;
  }

  private message(flags: number, body: Uint8Array): void {
    if (this.protocol === "connect" && (flags & connectProtocol.endStreamFlag) !== 0) {
      this.endStreamSeen = true;
      const { error } = connectProtocol.endStreamFromJson(body);
      if (error) throw error;
      this.finish();
      return;
    }
    if ((flags & compressedFlag) !== 0) {
      throw new ConnectError("the server sent a compressed message, and the session accepts no compression", Code.Internal);
    }
    let msg: ServerMessage;
    try {
      msg = fromBinary(ServerMessageSchema, body);
    } catch (err) {
      throw new ConnectError(`parse binary: ${err instanceof Error ? err.message : String(err)}`, Code.Internal);
    }
    this.inbox.push(msg);
  }

  private onEnd(): void {
    if (this.finished) return;
    try {
      if (this.protocol === "grpc") {
        grpcProtocol.validateTrailer(this.trailer, this.header ?? new Headers());
      } else if (!this.endStreamSeen) {
        throw new ConnectError("protocol error: the session ended without its end-stream message", Code.Internal);
      }
      this.finish();
    } catch (err) {
      this.fail(err instanceof Error ? err : new ConnectError(String(err), Code.Internal));
    }
  }

  /** finish ends the call cleanly. */
  private finish(): void {
    if (this.finished) return;
    this.finished = true;
    this.release();
    this.wake();
  }

  /** fail ends the call with err (the first end wins). */
  private fail(err: Error): void {
    if (this.finished) return;
    this.finished = true;
    this.failure = err;
    this.release();
    this.wake();
  }

  private release(): void {
    this.signal.removeEventListener("abort", this.onAbort);
    this.pending.length = 0;
    this.onWritten = [];
    this.parts = [];
    this.partsLength = 0;
    const stream = this.stream;
    if (stream && !stream.closed) stream.close(http2.constants.NGHTTP2_CANCEL);
  }

  private wake(): void {
    const r = this.reader;
    if (!r) return;
    this.reader = undefined;
    if (this.inbox.length > 0) {
      const batch = this.inbox;
      this.inbox = [];
      r.resolve(batch);
    } else if (this.failure) {
      r.reject(this.failure);
    } else {
      r.resolve(undefined);
    }
  }
}

/** webHeaders converts Node's headers to the Fetch API's, which Connect's protocol code reads. */
function webHeaders(headers: http2.IncomingHttpHeaders): Headers {
  const out = new Headers();
  for (const [key, value] of Object.entries(headers)) {
    if (key.startsWith(":") || value === undefined) continue;
    if (Array.isArray(value)) for (const v of value) out.append(key, v);
    else out.append(key, String(value));
  }
  return out;
}

/** abortReason is why signal aborted, as an Error. */
function abortReason(signal: AbortSignal): Error {
  const r: unknown = signal.reason;
  return r instanceof Error ? r : new ConnectError("the session was canceled", Code.Canceled);
}

/** resetError is the error an HTTP/2 reset code stands for (gRPC's mapping); undefined for none or NO_ERROR. */
function resetError(rstCode: number | undefined): ConnectError | undefined {
  const c = http2.constants;
  const code = (() => {
    switch (rstCode) {
      case undefined:
      case c.NGHTTP2_NO_ERROR:
        return undefined;
      case c.NGHTTP2_REFUSED_STREAM:
        return Code.Unavailable;
      case c.NGHTTP2_CANCEL:
        return Code.Canceled;
      case c.NGHTTP2_ENHANCE_YOUR_CALM:
        return Code.ResourceExhausted;
      case c.NGHTTP2_INADEQUATE_SECURITY:
      case c.NGHTTP2_HTTP_1_1_REQUIRED:
        return Code.PermissionDenied;
      default:
        return Code.Internal;
    }
  })();
  return code === undefined ? undefined : new ConnectError(`http/2 stream closed with error code 0x${(rstCode ?? 0).toString(16)}`, code);
}

/** nodeError types an error from the connection: a ConnectError stays as is, anything else is unavailable. */
function nodeError(err: unknown): Error {
  if (err instanceof ConnectError) return err;
  return new ConnectError(err instanceof Error ? err.message : String(err), Code.Unavailable, undefined, undefined, err);
}
