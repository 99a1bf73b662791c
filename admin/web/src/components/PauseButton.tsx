import { useState } from "preact/hooks";
import type { QueueInfo } from "../gen/conveyor/v1/admin_pb";
import { admin, asError } from "../lib/api";
import { refreshQueues } from "../lib/live";

/**
 * PauseButton pauses or resumes a queue's dispatch; an error is shown
 * beside it.
 */
export function PauseButton({ queue }: { queue: QueueInfo }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState("");
  const toggle = async () => {
    setBusy(true);
    setError("");
    try {
      if (queue.paused) await admin.resumeQueue({ queue: queue.name });
      else await admin.pauseQueue({ queue: queue.name });
    } catch (err) {
      setError(asError(err).message);
    } finally {
      setBusy(false);
      refreshQueues();
    }
  };
  const verb = queue.paused ? "Resume" : "Pause";
  return (
    <span class="pause">
      <button type="button" disabled={busy} onClick={toggle} aria-label={`${verb} queue ${queue.name}`} data-action={verb.toLowerCase()}>
        {verb}
      </button>
      {error && (
        <span class="error-inline" role="alert">
          {error}
        </span>
      )}
    </span>
  );
}

/** PausedBadge marks a paused queue. */
export function PausedBadge({ paused }: { paused: boolean }) {
  return paused ? <span class="badge paused">Paused</span> : <span class="badge running">Running</span>;
}
