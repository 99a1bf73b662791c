import type { Interceptor, Transport } from "@connectrpc/connect";
import { Http2SessionManager, createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";

/**
 * Protocol is the wire format of the calls: the gRPC protocol (the default)
 * or Connect's. Both carry the worker's bidirectional session over HTTP/2.
 */
export type Protocol = "grpc" | "connect";

/** ConnectionOptions say how to reach one Conveyor server. */
export interface ConnectionOptions {
  /**
   * The server's URL: `http://host:port` for HTTP/2 without TLS (h2c), or
   * `https://host:port` for HTTP/2 over TLS.
   */
  url: string;
  /** The bearer token sent with every call; none when empty. */
  token?: string;
  /** The wire format; `grpc` unless set. */
  protocol?: Protocol;
  /** PEM certificates to trust for an https:// URL, beside the system's. */
  tlsCa?: string | Buffer;
  /**
   * How often an idle HTTP/2 connection is pinged, in milliseconds, so a
   * stream never hangs behind a dead connection. Default 15000.
   */
  pingIntervalMs?: number;
  /** How long a ping may go unanswered before the connection is closed. Default 10000. */
  pingTimeoutMs?: number;
}

/** DEFAULT_PING_INTERVAL_MS is the keepalive ping interval unless set. */
export const DEFAULT_PING_INTERVAL_MS = 15_000;
/** DEFAULT_PING_TIMEOUT_MS is how long a ping may go unanswered unless set. */
export const DEFAULT_PING_TIMEOUT_MS = 10_000;

/**
 * checkURL returns the URL without a trailing slash, or throws a TypeError
 * naming what is wrong with it.
 */
export function checkURL(url: string): string {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new TypeError(`conveyor: server URL ${JSON.stringify(url)} is not a URL`);
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") {
    throw new TypeError(`conveyor: server URL ${JSON.stringify(url)} must start with http:// or https://`);
  }
  if (u.hostname === "") {
    throw new TypeError(`conveyor: server URL ${JSON.stringify(url)} has no host`);
  }
  return url.replace(/\/+$/, "");
}

/**
 * createTransport makes the HTTP/2 transport every client and worker of
 * the SDK uses: binary protobuf, the token on every request, keepalive
 * pings on, and no compression asked for. Node's zlib builds a fresh
 * inflate stream (a 32 KiB window, native state) for every compressed
 * message: a server that compresses every frame, however small (as
 * connect-go does by default), made a worker spend a fifth of its CPU and
 * much of its GC there, and read a storm of Pings five times slower than
 * the Go SDK. Conveyor's server compresses only responses of 8 KiB and
 * more, so little is lost.
 */
export function createTransport(
  opts: ConnectionOptions,
  own: { sessionManager?: Http2SessionManager; interceptors?: Interceptor[] } = {},
): Transport {
  const baseUrl = checkURL(opts.url);
  const interceptors: Interceptor[] = [...(own.interceptors ?? [])];
  if (opts.token) {
    const header = `Bearer ${opts.token}`;
    interceptors.push((next) => (req) => {
      req.header.set("Authorization", header);
      return next(req);
    });
  }
  const common = {
    baseUrl,
    httpVersion: "2" as const,
    interceptors,
    useBinaryFormat: true,
    acceptCompression: [],
    // The connection, its pings and TLS: the caller's own manager when it
    // must close the connection itself, else one made here alike.
    sessionManager: own.sessionManager ?? createSessionManager(opts),
  };
  const protocol = opts.protocol ?? "grpc";
  switch (protocol) {
    case "grpc":
      return createGrpcTransport(common);
    case "connect":
      return createConnectTransport(common);
    default:
      throw new TypeError(`conveyor: protocol ${JSON.stringify(protocol)} is not grpc or connect`);
  }
}

/**
 * createSessionManager makes the manager of one HTTP/2 connection to the
 * server, kept alive with pings, with the TLS options: every transport's
 * (createTransport), and a Worker's sessions'.
 */
export function createSessionManager(opts: ConnectionOptions): Http2SessionManager {
  return new Http2SessionManager(
    checkURL(opts.url),
    {
      pingIntervalMs: opts.pingIntervalMs ?? DEFAULT_PING_INTERVAL_MS,
      pingTimeoutMs: opts.pingTimeoutMs ?? DEFAULT_PING_TIMEOUT_MS,
      pingIdleConnection: true,
    },
    opts.tlsCa ? { ca: opts.tlsCa } : {},
  );
}
