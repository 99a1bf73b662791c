// Payloads and results as a person reads them: JSON indented, text as it
// is, anything else as a hex dump.

/** Rendered is a payload ready to show. */
export interface Rendered {
  kind: "empty" | "json" | "text" | "hex";
  text: string;
  /** truncated counts bytes left out of a long hex dump. */
  truncated: number;
}

/** HEX_LIMIT bounds the bytes shown as hex (a payload may be 1 MiB). */
export const HEX_LIMIT = 16 * 1024;

/**
 * INDENT_LIMIT bounds the indented JSON, in characters: deeply nested JSON
 * grows with its depth on every line (200 KiB can indent to gigabytes),
 * and is then shown as the text it is.
 */
export const INDENT_LIMIT = 8 << 20;

const strict = new TextDecoder("utf-8", { fatal: true });

function utf8(b: Uint8Array): string | undefined {
  try {
    return strict.decode(b);
  } catch {
    return undefined;
  }
}

// printable allows text with the usual whitespace but no other control
// characters, so binary that happens to be valid UTF-8 still shows as hex.
function printable(s: string): boolean {
  return !/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/.test(s);
}

function isJSONType(ct: string): boolean {
  const t = ct.split(";")[0]?.trim().toLowerCase() ?? "";
  return t === "" || t === "application/json" || t.endsWith("+json") || t.endsWith("/json");
}

// isBinaryType names the codecs whose bytes are not text even when they
// happen to decode as UTF-8.
function isBinaryType(ct: string): boolean {
  const t = ct.split(";")[0]?.trim().toLowerCase() ?? "";
  return /octet-stream|protobuf|proto$|msgpack|cbor|avro|bson|gzip|zstd/.test(t);
}

/**
 * render decides how to show b, given its content type ("" means
 * application/json, the server's default). A JSON type whose bytes do not
 * parse falls back to text or hex.
 */
export function render(b: Uint8Array, contentType: string): Rendered {
  if (b.length === 0) return { kind: "empty", text: "", truncated: 0 };
  const s = utf8(b);
  if (s !== undefined && isJSONType(contentType)) {
    const pretty = indentJSON(s);
    if (pretty !== undefined) return { kind: "json", text: pretty, truncated: 0 };
  }
  if (s !== undefined && printable(s) && !isBinaryType(contentType)) {
    return { kind: "text", text: s, truncated: 0 };
  }
  return { kind: "hex", text: hexdump(b.subarray(0, HEX_LIMIT)), truncated: Math.max(0, b.length - HEX_LIMIT) };
}

/**
 * indentJSON re-indents valid JSON by two spaces without parsing its
 * numbers into floats, so 64-bit ids and exact decimals show verbatim. It
 * returns undefined when s is not JSON, or when indented it would be longer
 * than INDENT_LIMIT.
 */
export function indentJSON(s: string): string | undefined {
  try {
    JSON.parse(s);
  } catch {
    return undefined;
  }
  let out = "";
  let depth = 0;
  let inString = false;
  const nl = () => "\n" + "  ".repeat(depth);
  for (let i = 0; i < s.length; i++) {
    if (out.length > INDENT_LIMIT) return undefined;
    const c = s[i] as string;
    if (inString) {
      out += c;
      if (c === "\\") {
        out += s[++i] ?? "";
      } else if (c === '"') {
        inString = false;
      }
      continue;
    }
    switch (c) {
      case '"':
        inString = true;
        out += c;
        break;
      case "{":
      case "[": {
        // Keep empty objects and arrays on one line.
        let j = i + 1;
        while (j < s.length && /\s/.test(s[j] as string)) j++;
        const close = c === "{" ? "}" : "]";
        if (s[j] === close) {
          out += c + close;
          i = j;
        } else {
          depth++;
          out += c + nl();
        }
        break;
      }
      case "}":
      case "]":
        depth--;
        out += nl() + c;
        break;
      case ",":
        out += "," + nl();
        break;
      case ":":
        out += ": ";
        break;
      case " ":
      case "\t":
      case "\n":
      case "\r":
        break;
      default:
        out += c;
    }
  }
  return out;
}

/** hexdump lays b out as offset, 16 hex bytes and their ASCII, per line. */
export function hexdump(b: Uint8Array): string {
  const lines: string[] = [];
  for (let off = 0; off < b.length; off += 16) {
    const row = b.subarray(off, off + 16);
    let hex = "";
    let ascii = "";
    for (let i = 0; i < 16; i++) {
      const v = row[i];
      if (v === undefined) {
        hex += "   ";
      } else {
        hex += v.toString(16).padStart(2, "0") + " ";
        ascii += v >= 0x20 && v < 0x7f ? String.fromCharCode(v) : ".";
      }
      if (i === 7) hex += " ";
    }
    lines.push(`${off.toString(16).padStart(8, "0")}  ${hex} ${ascii}`);
  }
  return lines.join("\n");
}
