import { useState } from "preact/hooks";
import { Code } from "@connectrpc/connect";
import { asError, tasks } from "../lib/api";
import { navigate, seg } from "../lib/router";

/**
 * TaskSearch is the header's box that opens a task by id, in whatever
 * queue it is: it asks GetTask first, so an id that names no task is
 * said so here rather than on an error page. Enter opens it: the form
 * has no button of its own, so that a page's own form stays the first
 * with one.
 */
export function TaskSearch() {
  const [note, setNote] = useState("");
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    const form = e.currentTarget as HTMLFormElement;
    const id = String(new FormData(form).get("id") ?? "").trim();
    if (!id) return;
    setBusy(true);
    setNote("");
    try {
      await tasks.getTask({ id });
      form.reset();
      navigate(`/tasks/${seg(id)}`);
    } catch (err) {
      const ce = asError(err);
      setNote(ce.code === Code.NotFound ? `No task has the id ${id}.` : ce.message);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="task-search" role="search" aria-label="Open a task by id" onSubmit={(e) => void submit(e)}>
      <input
        id="task-search"
        name="id"
        type="search"
        placeholder="Open a task by id"
        aria-label="Task id (Enter opens the task)"
        readOnly={busy}
        aria-describedby={note ? "task-search-note" : undefined}
        autocomplete="off"
        spellcheck={false}
        onInput={() => setNote("")}
      />
      {note && (
        <p id="task-search-note" class="task-search-note" role="alert">
          {note}
        </p>
      )}
    </form>
  );
}
