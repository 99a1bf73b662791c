import { Code } from "@connectrpc/connect";
import { errorFor } from "./errors.js";

/** JSON_CONTENT_TYPE is the content type of enqueueJSON's payloads (and the server's default). */
export const JSON_CONTENT_TYPE = "application/json";

/**
 * RawJSON is JSON text that enqueueJSON sends byte for byte instead of
 * serialising a value. Use it for JSON that JSON.stringify would change:
 * integers past 2^53 (which a JS number cannot hold), or text serialised
 * elsewhere whose exact bytes matter. Make one with rawJSON.
 */
export class RawJSON {
  /** The JSON text, sent as its UTF-8 bytes. */
  readonly text: string;

  constructor(text: string) {
    this.text = text;
  }
}

/**
 * rawJSON wraps JSON text for enqueueJSON, which then sends it unchanged:
 * `client.enqueueJSON("t", rawJSON('{"id": 12345678901234567890}'))` keeps
 * the integer exact. The text is checked to be one JSON value; a text that
 * is not throws InvalidArgumentError.
 */
export function rawJSON(text: string): RawJSON {
  if (typeof text !== "string") throw errorFor(Code.InvalidArgument, "conveyor: rawJSON takes a string");
  try {
    JSON.parse(text);
  } catch (err) {
    throw errorFor(Code.InvalidArgument, `conveyor: rawJSON text is not JSON: ${(err as Error).message}`);
  }
  return new RawJSON(text);
}

const encoder = new TextEncoder();

/**
 * jsonPayload is the UTF-8 bytes of value as JSON: a RawJSON's text as is,
 * anything else through JSON.stringify. A value JSON cannot represent
 * (undefined, a function, a symbol) or that JSON.stringify refuses (a
 * cycle, a BigInt) throws InvalidArgumentError.
 */
export function jsonPayload(value: unknown): Uint8Array {
  if (value instanceof RawJSON) return encoder.encode(value.text);
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (err) {
    throw errorFor(Code.InvalidArgument, `conveyor: the payload is not serialisable as JSON: ${(err as Error).message}`);
  }
  if (text === undefined) {
    throw errorFor(Code.InvalidArgument, `conveyor: the payload (${typeof value}) has no JSON form`);
  }
  return encoder.encode(text);
}
