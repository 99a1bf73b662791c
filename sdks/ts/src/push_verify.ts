import { createHmac, timingSafeEqual } from "node:crypto";

/** PUSH_SECRET_PREFIX starts every push secret: `whsec_` then the base64 of the key (Standard Webhooks). */
export const PUSH_SECRET_PREFIX = "whsec_";
/** MIN_PUSH_KEY_BYTES is the shortest key a push secret may hold (as the server requires). */
export const MIN_PUSH_KEY_BYTES = 24;
/** MAX_PUSH_KEY_BYTES is the longest key a push secret may hold (as the server requires). */
export const MAX_PUSH_KEY_BYTES = 64;

const base64RE = /^[A-Za-z0-9+/]+={0,2}$/;

/**
 * parsePushSecret returns the key of a `whsec_<base64>` secret, or throws
 * a TypeError naming the secret by where it came from (never its text,
 * which would put it in logs) and what is wrong with it.
 */
export function parsePushSecret(secret: string, name: string): Buffer {
  if (typeof secret !== "string" || !secret.startsWith(PUSH_SECRET_PREFIX)) {
    throw new TypeError(`conveyor: push secret ${name} must be written ${PUSH_SECRET_PREFIX}<base64 of the key>`);
  }
  const b64 = secret.slice(PUSH_SECRET_PREFIX.length).trim();
  const key = Buffer.from(b64, "base64");
  // Buffer.from skips what is not base64; a round trip catches it.
  if (!base64RE.test(b64) || key.toString("base64").replace(/=+$/, "") !== b64.replace(/=+$/, "")) {
    throw new TypeError(`conveyor: push secret ${name} is not standard base64 after ${PUSH_SECRET_PREFIX}`);
  }
  if (key.length < MIN_PUSH_KEY_BYTES || key.length > MAX_PUSH_KEY_BYTES) {
    throw new TypeError(
      `conveyor: push secret ${name} holds a ${key.length}-byte key; a key has ${MIN_PUSH_KEY_BYTES} to ${MAX_PUSH_KEY_BYTES} bytes`,
    );
  }
  return key;
}

/** Refusal is why a push request is refused: its HTTP status and a message naming what is wrong. */
export interface Refusal {
  status: number;
  message: string;
}

/** SignedHeaders are a request's three Standard Webhooks headers, once present and in time. */
export interface SignedHeaders {
  id: string;
  timestamp: string;
  /** timestampMs is webhook-timestamp in milliseconds since the epoch. */
  timestampMs: number;
  signature: string;
}

/**
 * readTimestamp parses webhook-timestamp (Unix seconds, decimal); undefined
 * if it is not that.
 */
export function readTimestamp(v: string | undefined): number | undefined {
  if (v === undefined || !/^[0-9]{1,15}$/.test(v.trim())) return undefined;
  return Number(v.trim()) * 1000;
}

/**
 * checkHeaders finds the three headers a signed request must carry and
 * checks its timestamp is within toleranceMs of now, either way (a clock
 * ahead or behind is tolerated that far; an old request is refused so that
 * a captured one cannot be replayed later): a Refusal (401) if not.
 */
export function checkHeaders(
  header: (name: string) => string | undefined,
  now: number,
  toleranceMs: number,
): SignedHeaders | Refusal {
  const id = header("webhook-id")?.trim();
  const timestamp = header("webhook-timestamp")?.trim();
  const signature = header("webhook-signature")?.trim();
  const missing = [
    id ? "" : "webhook-id",
    timestamp ? "" : "webhook-timestamp",
    signature ? "" : "webhook-signature",
  ].filter((n) => n !== "");
  if (!id || !timestamp || !signature) {
    return { status: 401, message: `the request is not signed: it has no ${missing.join(", ")} header` };
  }
  const timestampMs = readTimestamp(timestamp);
  if (timestampMs === undefined) {
    return { status: 401, message: `webhook-timestamp ${JSON.stringify(timestamp)} is not Unix seconds` };
  }
  const skew = timestampMs - now;
  if (Math.abs(skew) > toleranceMs) {
    const when = skew < 0 ? `${Math.round(-skew / 1000)}s old` : `${Math.round(skew / 1000)}s in the future`;
    return { status: 401, message: `webhook-timestamp ${timestamp} is ${when}; at most ${toleranceMs / 1000}s either way is accepted` };
  }
  return { id, timestamp, timestampMs, signature };
}

/**
 * signatureMatches reports whether any `v1,<base64>` entry of the
 * webhook-signature header is the HMAC-SHA256, under any of keys, of
 * `<webhook-id>.<webhook-timestamp>.<body>`. Entries are separated by
 * spaces (a trailing comma, left by a proxy joining repeated headers, is
 * dropped); other versions are ignored. Each comparison is constant-time
 * (crypto.timingSafeEqual), and every entry is compared under every key.
 */
export function signatureMatches(keys: readonly Buffer[], h: SignedHeaders, body: Uint8Array): boolean {
  const given: Buffer[] = [];
  for (const entry of h.signature.split(/\s+/)) {
    const e = entry.replace(/,+$/, "");
    if (e.startsWith("v1,")) given.push(Buffer.from(e.slice(3), "latin1"));
  }
  let ok = false;
  for (const key of keys) {
    const want = Buffer.from(
      createHmac("sha256", key).update(`${h.id}.${h.timestamp}.`).update(body).digest("base64"),
      "latin1",
    );
    for (const g of given) {
      if (g.length === want.length && timingSafeEqual(g, want)) ok = true;
    }
  }
  return ok;
}
