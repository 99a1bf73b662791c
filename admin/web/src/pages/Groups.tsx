import { admin } from "../lib/api";
import { dateOf } from "../lib/format";
import { useLive } from "../lib/live";
import { useNow, usePoll } from "../lib/poll";
import { navigate, seg, useLocation, withQuery } from "../lib/router";
import { useTitle } from "../lib/title";
import { Link } from "../components/Link";
import { Empty, ErrorBox, Loading } from "../components/Status";
import { Time } from "../components/Time";

/**
 * GroupsPage lists the aggregation groups waiting to fire: their size and
 * when each fires (at whichever of the queue's group triggers comes first).
 */
export function GroupsPage() {
  const loc = useLocation();
  const queue = loc.query.get("queue") ?? "";
  useTitle(queue ? `Groups in ${queue}` : "Groups");
  const lv = useLive();
  const now = useNow();
  const groups = usePoll((signal) => admin.listGroups({ queue }, { signal }), 2000, [queue]);
  const list = groups.data?.groups ?? [];
  return (
    <>
      <div class="page-head">
        <h1>Groups waiting</h1>
      </div>
      <form class="filters" onSubmit={(e) => e.preventDefault()} aria-label="Filter groups">
        <div class="field">
          <label for="g-queue">Queue</label>
          <select id="g-queue" value={queue} onChange={(e) => navigate(withQuery("/groups", { queue: e.currentTarget.value }))}>
            <option value="">Every queue</option>
            {(lv.queues ?? []).map((q) => (
              <option key={q.name} value={q.name}>
                {q.name}
              </option>
            ))}
          </select>
        </div>
      </form>
      <section class="panel" aria-label="Groups">
        {groups.error && <ErrorBox error={groups.error} what="Could not list the groups" retry={groups.reload} />}
        {!groups.data ? (
          groups.error ? null : <Loading />
        ) : list.length === 0 ? (
          <Empty cmd={`conveyor enqueue digest '{}'${queue ? ` --queue ${queue}` : ""} --group batch-1`}>
            No group is waiting{queue ? ` in ${queue}` : ""}. Tasks enqueued with a group wait here until the group fires:
          </Empty>
        ) : (
          <div class="table-wrap">
            <table class="responsive">
              <thead>
                <tr>
                  <th scope="col">Queue</th>
                  <th scope="col">Group</th>
                  <th scope="col">Type</th>
                  <th scope="col" class="num">
                    Size
                  </th>
                  <th scope="col">First task</th>
                  <th scope="col">Latest task</th>
                  <th scope="col">Fires</th>
                </tr>
              </thead>
              <tbody>
                {list.map((g) => {
                  const fires = dateOf(g.firesAt);
                  const fired = fires !== undefined && fires.getTime() <= now;
                  return (
                    <tr key={`${g.queue}/${g.group}/${g.type}`}>
                      <td data-label="Queue">
                        <Link to={`/queues/${seg(g.queue)}`}>{g.queue}</Link>
                      </td>
                      <th scope="row" data-label="Group" class="mono">
                        <Link to={withQuery("/tasks", { queue: g.queue, state: "aggregating", type: g.type, group: g.group })}>{g.group}</Link>
                      </th>
                      <td data-label="Type" class="mono">
                        {g.type}
                      </td>
                      <td data-label="Size" class="num">
                        {g.size}
                      </td>
                      <td data-label="First task">
                        <Time ts={g.firstEnqueuedAt} />
                      </td>
                      <td data-label="Latest task">
                        <Time ts={g.lastEnqueuedAt} />
                      </td>
                      <td data-label="Fires">
                        <Time ts={g.firesAt} />
                        {fired && <span class="muted"> · waiting for a worker that handles {g.type}</span>}
                      </td>
                    </tr>
                  );
                })}
              </tbody>
            </table>
          </div>
        )}
      </section>
    </>
  );
}
