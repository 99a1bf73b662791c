import { useState } from "preact/hooks";
import type { QueueInfo } from "../gen/conveyor/v1/admin_pb";
import { admin, asError } from "../lib/api";
import { refreshQueues } from "../lib/live";
import { ConfirmButton } from "./ConfirmButton";

/**
 * DeleteQueueButton forgets an empty queue after a confirm step; the
 * caller shows it only for a queue holding no task (the server refuses
 * the others, and its message is shown beside the button).
 */
export function DeleteQueueButton({ queue }: { queue: QueueInfo }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState("");
  const remove = async () => {
    setBusy(true);
    setError("");
    try {
      await admin.deleteQueue({ queue: queue.name });
    } catch (err) {
      setError(asError(err).message);
    } finally {
      setBusy(false);
      refreshQueues();
    }
  };
  return (
    <span class="pause">
      <ConfirmButton
        label="Delete"
        question={`Delete queue ${queue.name}? Its configuration and totals are forgotten.`}
        danger
        disabled={busy}
        action="delete-queue"
        onConfirm={() => void remove()}
      />
      {error && (
        <span class="error-inline" role="alert">
          {error}
        </span>
      )}
    </span>
  );
}
