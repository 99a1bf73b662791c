import type { ComponentChildren } from "preact";
import { Code, type ConnectError } from "@connectrpc/connect";
import { Command } from "./Command";

/**
 * ErrorBox shows an RPC's error with its code and message; a retry button
 * when the caller can retry.
 */
export function ErrorBox({ error, retry, what }: { error: ConnectError; retry?: () => void; what?: string }) {
  const hint =
    error.code === Code.Unimplemented
      ? "This server does not implement this call yet; upgrade the server."
      : error.code === Code.Unavailable
        ? "The server could not be reached."
        : undefined;
  return (
    <div class="error" role="alert">
      <p>
        <strong>{what ?? "The request failed"}:</strong> {error.message}
      </p>
      {hint && <p class="muted">{hint}</p>}
      {retry && (
        <button type="button" onClick={retry}>
          Try again
        </button>
      )}
    </div>
  );
}

/**
 * Empty says there is nothing to show, and why; with cmd, the command to
 * run next, to copy.
 */
export function Empty({ children, cmd }: { children: ComponentChildren; cmd?: string }) {
  if (!cmd) return <p class="empty">{children}</p>;
  return (
    <div class="empty">
      <p>{children}</p>
      <Command cmd={cmd} />
    </div>
  );
}

/** Loading is the placeholder while the first answer is on its way. */
export function Loading({ what = "Loading" }: { what?: string }) {
  return (
    <p class="muted" role="status" aria-live="polite">
      {what}…
    </p>
  );
}

/** Notice is a short message after an action: info, or an error. */
export function Notice({ kind, children, onClose }: { kind: "ok" | "error"; children: ComponentChildren; onClose?: () => void }) {
  return (
    <div class={`notice notice-${kind}`} role={kind === "error" ? "alert" : "status"}>
      <span>{children}</span>
      {onClose && (
        <button type="button" class="link" onClick={onClose} aria-label="Dismiss">
          ×
        </button>
      )}
    </div>
  );
}
