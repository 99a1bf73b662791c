import { useState } from "preact/hooks";
import { command, needsToken } from "../lib/cli";

/**
 * Command shows a shell command to run next, with a button that copies it.
 * The clipboard needs a secure context (https, or loopback as a server
 * without a token is); elsewhere the button selects the text to copy by
 * hand.
 */
export function Command({ cmd }: { cmd: string }) {
  const full = command(cmd);
  const [note, setNote] = useState("");
  let code: HTMLElement | null = null;
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(full);
      setNote("Copied");
    } catch {
      if (code) getSelection()?.selectAllChildren(code);
      setNote("Selected: copy it with Ctrl+C");
    }
  };
  return (
    <div class="command">
      <code
        class="mono"
        ref={(el) => {
          code = el;
        }}
      >
        {full}
      </code>
      <button type="button" onClick={() => void copy()} aria-label={`Copy the command: ${full}`}>
        Copy
      </button>
      <span class="muted" role="status">
        {note}
      </span>
      {needsToken() && <p class="muted">The server asks for a token: set CONVEYOR_TOKEN to it first.</p>}
    </div>
  );
}
