import { useState } from "preact/hooks";
import type { ReleaseInfo } from "../gen/conveyor/v1/admin_pb";
import { admin, asError } from "../lib/api";
import { int } from "../lib/format";
import { usePoll } from "../lib/poll";
import { ConfirmButton } from "../components/ConfirmButton";
import { Empty, ErrorBox, Loading, Notice } from "../components/Status";
import { Time } from "../components/Time";

/**
 * ReleasesPanel lists the worker releases the server has seen, the newest
 * first, with when each was first seen and its live sessions; a release
 * not yet drained has Drain (DrainRelease), which asks first. onDrained
 * refreshes what else the page shows of the release's workers.
 */
export function ReleasesPanel({ onDrained }: { onDrained: () => void }) {
  const r = usePoll((signal) => admin.listReleases({}, { signal }), 2000, []);
  const [busy, setBusy] = useState(false);
  const [note, setNote] = useState<{ kind: "ok" | "error"; text: string } | undefined>();
  const drain = async (id: string) => {
    setBusy(true);
    setNote(undefined);
    try {
      await admin.drainRelease({ releaseId: id });
      setNote({ kind: "ok", text: `Release ${id} drained: its workers get no new work.` });
    } catch (err) {
      setNote({ kind: "error", text: asError(err).message });
    } finally {
      setBusy(false);
      r.reload();
      onDrained();
    }
  };
  const releases = r.data?.releases ?? [];
  return (
    <section class="panel" aria-labelledby="releases-h">
      <h2 id="releases-h">Releases</h2>
      <p class="muted">
        New work goes to the newest release that can take it; older ones get work only when no newer one can. A drained release
        gets no new work and finishes what it holds; a drain cannot be undone.
      </p>
      {note && (
        <Notice kind={note.kind} onClose={() => setNote(undefined)}>
          {note.text}
        </Notice>
      )}
      {r.error && <ErrorBox error={r.error} what="Could not list the releases" retry={r.reload} />}
      {!r.data ? (
        r.error ? null : <Loading what="Loading the releases" />
      ) : releases.length === 0 ? (
        <Empty>No release seen yet: every worker is unversioned. A worker names its release in its Hello (release_id).</Empty>
      ) : (
        <div class="table-wrap">
          <table class="responsive releases">
            <thead>
              <tr>
                <th scope="col">Release</th>
                <th scope="col">First seen</th>
                <th scope="col" class="num">
                  Sessions
                </th>
                <th scope="col">Status</th>
                <th scope="col">
                  <span class="sr-only">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {releases.map((x) => (
                <ReleaseRow key={x.releaseId} r={x} busy={busy} drain={drain} />
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

function ReleaseRow({ r, busy, drain }: { r: ReleaseInfo; busy: boolean; drain: (id: string) => Promise<void> }) {
  return (
    <tr data-release={r.releaseId}>
      <th scope="row" data-label="Release" class="mono">
        {r.releaseId}
      </th>
      <td data-label="First seen">
        <Time ts={r.firstSeenAt} />
      </td>
      <td data-label="Sessions" class="num">
        {int(r.sessions)}
      </td>
      <td data-label="Status">{r.draining ? <span class="badge draining">Draining</span> : <span class="badge running">Active</span>}</td>
      <td class="actions">
        {!r.draining && (
          <ConfirmButton
            label="Drain"
            question={`Drain release ${r.releaseId}? Its workers get no new work; this cannot be undone.`}
            danger
            disabled={busy}
            action="drain-release"
            onConfirm={() => void drain(r.releaseId)}
          />
        )}
      </td>
    </tr>
  );
}
