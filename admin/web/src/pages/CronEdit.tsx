import { useEffect, useState } from "preact/hooks";
import { create } from "@bufbuild/protobuf";
import { durationFromMs } from "@bufbuild/protobuf/wkt";
import type { ConnectError } from "@connectrpc/connect";
import { CronEntrySchema, type CronEntry } from "../gen/conveyor/v1/admin_pb";
import { TaskOptionsSchema } from "../gen/conveyor/v1/task_pb";
import { admin, asError } from "../lib/api";
import { flash } from "../lib/flash";
import { duration, durationMs, parseDuration } from "../lib/format";
import { navigate } from "../lib/router";
import { useTitle } from "../lib/title";
import { Link } from "../components/Link";
import { ErrorBox, Loading } from "../components/Status";

/** CronEditPage creates a cron entry (no id) or edits one. */
export function CronEditPage({ id }: { id?: string }) {
  useTitle(id ? `Edit ${id}` : "New cron entry");
  const [entry, setEntry] = useState<CronEntry | undefined>(id ? undefined : create(CronEntrySchema, { contentType: "application/json" }));
  const [error, setError] = useState<ConnectError | undefined>();
  useEffect(() => {
    if (id) admin.getCron({ id }).then(setEntry, (e: unknown) => setError(asError(e)));
  }, [id]);
  return (
    <>
      <p class="crumbs">
        <Link to="/crons">Cron entries</Link> /
      </p>
      <h1>{id ? <>Edit <span class="mono">{id}</span></> : "New cron entry"}</h1>
      {error && <ErrorBox error={error} what="Could not load the entry" />}
      {!entry ? error ? null : <Loading /> : <CronForm entry={entry} isNew={!id} />}
    </>
  );
}

interface Draft {
  id: string;
  spec: string;
  queue: string;
  type: string;
  payload: string;
  contentType: string;
  metadata: string;
  maxRetry: string;
  timeout: string;
  priority: string;
}

const dec = new TextDecoder();
const enc = new TextEncoder();

function draftOf(e: CronEntry): Draft {
  const o = e.options;
  return {
    id: e.id,
    spec: e.spec,
    queue: e.queue,
    type: e.type,
    payload: dec.decode(e.payload),
    contentType: e.contentType,
    metadata: Object.entries(e.metadata)
      .map(([k, v]) => `${k}=${v}`)
      .join("\n"),
    maxRetry: o?.maxRetry ? String(o.maxRetry) : "",
    timeout: o?.timeout ? duration(durationMs(o.timeout)) : "",
    priority: o?.priority ? String(o.priority) : "",
  };
}

type Problems = Partial<Record<keyof Draft, string>>;

// build makes the entry to send from the form and the entry being edited:
// options the form does not show are kept as they were.
function build(base: CronEntry, d: Draft): { entry?: CronEntry; problems: Problems } {
  const problems: Problems = {};
  if (!d.spec.trim()) problems.spec = "Enter a schedule, such as */5 * * * * or @every 1m.";
  if (!d.type.trim()) problems.type = "Enter the task type the entry enqueues.";
  const queue = d.queue.trim() || "default";
  if (!/^[a-zA-Z0-9][a-zA-Z0-9-_.]*$/.test(queue)) problems.queue = "Letters, digits, and - _ . after the first.";
  if (d.id && !/^[a-zA-Z0-9][a-zA-Z0-9-_.]*$/.test(d.id)) problems.id = "Letters, digits, and - _ . after the first; or empty.";
  // One key=value a line cannot hold a value that spans lines: an
  // unchanged field keeps the entry's own map.
  const keep = d.metadata === draftOf(base).metadata;
  const metadata: Record<string, string> = keep ? { ...base.metadata } : {};
  for (const line of keep ? [] : d.metadata.split("\n")) {
    if (!line.trim()) continue;
    const i = line.indexOf("=");
    if (i <= 0) {
      problems.metadata = `“${line}” is not key=value.`;
      break;
    }
    metadata[line.slice(0, i).trim()] = line.slice(i + 1);
  }
  const ct = d.contentType.trim();
  if (d.payload && (ct === "" || ct.includes("json"))) {
    try {
      JSON.parse(d.payload);
    } catch (e) {
      problems.payload = `Not valid JSON (${(e as Error).message}); fix it, or change the content type.`;
    }
  }
  const maxRetry = d.maxRetry.trim() === "" ? 0 : Number(d.maxRetry);
  if (!Number.isInteger(maxRetry) || maxRetry < 0) problems.maxRetry = "A whole number, 0 or more (0: the server default).";
  const priority = d.priority.trim() === "" ? 0 : Number(d.priority);
  if (!Number.isInteger(priority) || priority < 0 || priority > 9) problems.priority = "1 (lowest) to 9 (highest); empty: 4.";
  const timeout = parseDuration(d.timeout);
  if (timeout === undefined) problems.timeout = "A duration such as 30s or 5m; empty: none.";
  if (Object.keys(problems).length) return { problems };
  const options = create(TaskOptionsSchema, base.options ?? {});
  options.maxRetry = maxRetry;
  options.priority = priority;
  options.timeout = timeout ? durationFromMs(timeout) : undefined;
  const entry = create(CronEntrySchema, {
    id: d.id.trim(),
    spec: d.spec.trim(),
    queue,
    type: d.type.trim(),
    // The form shows the payload as text, which bytes that are not UTF-8
    // do not survive: an unchanged payload keeps the entry's own bytes.
    payload: d.payload === dec.decode(base.payload) ? base.payload : enc.encode(d.payload),
    contentType: ct,
    metadata,
    options,
    paused: base.paused,
  });
  return { entry, problems };
}

// formFields are what the form edits: saving changes only them, so that a
// pause or resume made since the form was opened is not undone.
const formFields = ["spec", "queue", "type", "payload", "content_type", "metadata", "options"];

function CronForm({ entry, isNew }: { entry: CronEntry; isNew: boolean }) {
  const [d, setD] = useState<Draft>(() => draftOf(entry));
  const [problems, setProblems] = useState<Problems>({});
  const [error, setError] = useState<ConnectError | undefined>();
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    const b = build(entry, d);
    setProblems(b.problems);
    if (!b.entry) return;
    setBusy(true);
    setError(undefined);
    try {
      const saved = isNew
        ? await admin.createCron({ entry: b.entry })
        : await admin.updateCron({ entry: { ...b.entry, id: entry.id }, updateMask: { paths: formFields } });
      flash.set(isNew ? `Created ${saved.id}.` : `Saved ${saved.id}.`);
      navigate("/crons");
    } catch (err) {
      setError(asError(err));
      setBusy(false);
    }
  };
  const field = (k: keyof Draft, label: string, help: string, opts: { area?: boolean; placeholder?: string; mono?: boolean } = {}) => {
    const common = {
      id: `cron-${k}`,
      name: k,
      value: d[k],
      placeholder: opts.placeholder,
      class: opts.mono ? "mono" : undefined,
      "aria-describedby": `cron-${k}-help`,
      "aria-invalid": problems[k] ? ("true" as const) : undefined,
      onInput: (ev: Event) => setD({ ...d, [k]: (ev.currentTarget as HTMLInputElement).value }),
    };
    return (
      <div class={`field${opts.area ? " wide" : ""}`}>
        <label for={`cron-${k}`}>{label}</label>
        {opts.area ? <textarea rows={5} {...common} /> : <input {...common} />}
        <small id={`cron-${k}-help`} class={problems[k] ? "error-inline" : "muted"}>
          {problems[k] ?? help}
        </small>
      </div>
    );
  };
  return (
    <form class="form grid-form panel" onSubmit={submit} noValidate aria-label={isNew ? "New cron entry" : "Edit cron entry"}>
      {isNew && field("id", "ID", "Optional: a name for the entry. Empty: the server assigns one.")}
      {field("spec", "Schedule", "Five fields (minute hour day month weekday), six with seconds first, or @hourly, @every 1m30s; CRON_TZ=Area/City first for a time zone.", { placeholder: "*/5 * * * *", mono: true })}
      {field("queue", "Queue", "Where the tasks go. Empty: default.", { placeholder: "default" })}
      {field("type", "Task type", "The handler the tasks are routed to.", { mono: true })}
      {field("payload", "Payload", "The bytes of every task, as text.", { area: true, mono: true })}
      {field("contentType", "Content type", "Empty: application/json.", { placeholder: "application/json" })}
      {field("metadata", "Metadata", "One key=value a line, copied to every task.", { area: true, mono: true })}
      {field("maxRetry", "Max retry", "Empty or 0: the server default (25).")}
      {field("timeout", "Timeout", "How long one attempt may run, such as 30s. Empty: none.")}
      {field("priority", "Priority", "1 (lowest) to 9 (highest). Empty: 4.")}
      {error && <ErrorBox error={error} what="The entry was not saved" />}
      <div class="form-actions">
        <button type="submit" class="primary" disabled={busy}>
          {busy ? "Saving…" : isNew ? "Create entry" : "Save entry"}
        </button>
        <Link to="/crons" class="button">
          Cancel
        </Link>
      </div>
    </form>
  );
}
