import { useMemo } from "preact/hooks";
import { bytes } from "../lib/format";
import { render } from "../lib/payload";
import { Empty } from "./Status";

/**
 * PayloadView shows bytes by their content type: JSON indented, text as it
 * is, binary as a hex dump.
 */
export function PayloadView({ data, contentType, label }: { data: Uint8Array; contentType: string; label: string }) {
  const r = useMemo(() => render(data, contentType), [data, contentType]);
  if (r.kind === "empty") return <Empty>No {label.toLowerCase()}.</Empty>;
  const kind = r.kind === "json" ? "JSON" : r.kind === "text" ? "text" : "hex";
  return (
    <div class="payload">
      <p class="muted">
        {contentType || "application/json"} · {bytes(data.length)} · shown as {kind}
      </p>
      <pre tabIndex={0} aria-label={`${label}, ${kind}`} class={`code code-${r.kind}`}>
        {r.text}
      </pre>
      {r.truncated > 0 && <p class="muted">… and {bytes(r.truncated)} more, not shown.</p>}
    </div>
  );
}
