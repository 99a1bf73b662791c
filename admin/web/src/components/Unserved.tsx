import type { QueueInfo } from "../gen/conveyor/v1/admin_pb";
import { seg, withQuery } from "../lib/router";
import { Link } from "./Link";

/**
 * UnservedWarning says which types of a queue's ready tasks no live worker
 * takes (QueueInfo.unserved_types): no session serving the queue declares
 * them, or they are at-most-once and none asks before it starts one. Their
 * tasks wait, PENDING; each type links to them. Nothing shows when every
 * type is served.
 */
export function UnservedWarning({ queue: q }: { queue: QueueInfo }) {
  if (q.unservedTypes.length === 0) return null;
  return (
    <div class="warning unserved" role="status">
      <p>
        <strong>No live worker takes these types:</strong>{" "}
        {q.unservedTypes.map((t, i) => (
          <span key={t}>
            {i > 0 && ", "}
            <Link to={withQuery("/tasks", { queue: q.name, state: "pending", type: t })} class="mono">
              {t}
            </Link>
          </span>
        ))}{" "}
        — their tasks wait.
      </p>
      <p class="muted">
        Start a worker that serves this queue with handlers for them (or one that takes every type); an at-most-once task also
        needs a worker that asks before it starts one.
      </p>
    </div>
  );
}

/**
 * UnservedBadge marks, in the queues list, a queue holding ready tasks of
 * types no live worker takes; it links to the queue's page, which names
 * them all. Its word is short so that the list keeps its width; its title
 * and accessible name say which types.
 */
export function UnservedBadge({ queue: q }: { queue: QueueInfo }) {
  if (q.unservedTypes.length === 0) return null;
  const says = `No live worker takes ${q.unservedTypes.join(", ")} in ${q.name}`;
  return (
    <Link to={`/queues/${seg(q.name)}`} class="badge unserved" title={says} aria-label={says}>
      Unserved
    </Link>
  );
}
