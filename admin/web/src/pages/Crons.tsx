import { useEffect, useState } from "preact/hooks";
import type { CronEntry } from "../gen/conveyor/v1/admin_pb";
import { admin, asError } from "../lib/api";
import { flash } from "../lib/flash";
import { usePoll } from "../lib/poll";
import { seg, withQuery } from "../lib/router";
import { useStore } from "../lib/store";
import { useTitle } from "../lib/title";
import { ConfirmButton } from "../components/ConfirmButton";
import { Link } from "../components/Link";
import { Empty, ErrorBox, Loading, Notice } from "../components/Status";
import { Time } from "../components/Time";

/**
 * CronsPage lists the cron entries with their next and last run, and
 * pauses, resumes, edits and deletes them.
 */
export function CronsPage() {
  useTitle("Cron");
  const crons = usePoll((signal) => admin.listCrons({}, { signal }), 5000, []);
  const message = useStore(flash);
  // The message is for this visit: leaving the page drops it.
  useEffect(() => () => flash.set(""), []);
  const [note, setNote] = useState<{ kind: "ok" | "error"; text: string } | undefined>();
  const entries = crons.data?.entries ?? [];
  const act = async (what: string, call: () => Promise<unknown>) => {
    setNote(undefined);
    flash.set("");
    try {
      await call();
      setNote({ kind: "ok", text: what });
    } catch (err) {
      setNote({ kind: "error", text: asError(err).message });
    } finally {
      crons.reload();
    }
  };
  return (
    <>
      <div class="page-head">
        <h1>Cron entries</h1>
        <Link to="/crons/new" class="button primary">
          New cron entry
        </Link>
      </div>
      {message && (
        <Notice kind="ok" onClose={() => flash.set("")}>
          {message}
        </Notice>
      )}
      {note && (
        <Notice kind={note.kind} onClose={() => setNote(undefined)}>
          {note.text}
        </Notice>
      )}
      {crons.error && <ErrorBox error={crons.error} what="Could not list the cron entries" retry={crons.reload} />}
      {!crons.data ? (
        crons.error ? null : <Loading />
      ) : entries.length === 0 ? (
        <Empty cmd={`conveyor cron create '@hourly' report:build '{}'`}>
          No cron entries. A cron entry enqueues a task on a schedule: create one with New entry, or from a shell:
        </Empty>
      ) : (
        <div class="table-wrap panel">
          <table class="responsive crons">
            <thead>
              <tr>
                <th scope="col">Entry</th>
                <th scope="col">Schedule</th>
                <th scope="col">Task</th>
                <th scope="col">Next run</th>
                <th scope="col">Last run</th>
                <th scope="col">Status</th>
                <th scope="col">
                  <span class="sr-only">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {entries.map((c) => (
                <CronRow key={c.id} c={c} act={act} />
              ))}
            </tbody>
          </table>
        </div>
      )}
    </>
  );
}

function CronRow({ c, act }: { c: CronEntry; act: (what: string, call: () => Promise<unknown>) => Promise<void> }) {
  return (
    <tr data-cron={c.id}>
      <th scope="row" data-label="Entry" class="mono">
        {c.id}
      </th>
      <td data-label="Schedule" class="mono">
        {c.spec}
      </td>
      <td data-label="Task">
        <span class="mono">{c.type}</span> <span class="muted">in</span>{" "}
        <Link to={withQuery("/tasks", { queue: c.queue })}>{c.queue}</Link>
      </td>
      <td data-label="Next run">{c.paused ? <span class="muted">paused</span> : <Time ts={c.nextRunAt} />}</td>
      <td data-label="Last run">
        <Time ts={c.lastRunAt} empty="never" />
        {c.lastTaskId && (
          <>
            {" "}
            <Link to={`/tasks/${seg(c.lastTaskId)}`} aria-label={`Task of the last run of ${c.id}`}>
              (task)
            </Link>
          </>
        )}
        {c.lastError && <div class="error-inline cron-error">No task: {c.lastError}</div>}
      </td>
      <td data-label="Status">{c.paused ? <span class="badge paused">Paused</span> : <span class="badge running">Active</span>}</td>
      <td class="actions">
        {c.paused ? (
          <button type="button" onClick={() => void act(`Resumed ${c.id}.`, () => admin.resumeCron({ id: c.id }))} aria-label={`Resume ${c.id}`}>
            Resume
          </button>
        ) : (
          <button type="button" onClick={() => void act(`Paused ${c.id}.`, () => admin.pauseCron({ id: c.id }))} aria-label={`Pause ${c.id}`}>
            Pause
          </button>
        )}
        <Link to={`/crons/${seg(c.id)}/edit`} class="button" aria-label={`Edit ${c.id}`}>
          Edit
        </Link>
        <ConfirmButton
          label="Delete"
          question={`Delete ${c.id}?`}
          danger
          onConfirm={() => void act(`Deleted ${c.id}.`, () => admin.deleteCron({ id: c.id }))}
        />
      </td>
    </tr>
  );
}
