import { useEffect, useState } from "preact/hooks";
import { create } from "@bufbuild/protobuf";
import { durationFromMs } from "@bufbuild/protobuf/wkt";
import { Code, type ConnectError } from "@connectrpc/connect";
import { QueueConfigSchema, type QueueConfig } from "../gen/conveyor/v1/admin_pb";
import { admin, asError } from "../lib/api";
import { duration, durationMs, parseDuration } from "../lib/format";
import { refreshQueues } from "../lib/live";
import { ErrorBox, Loading, Notice } from "../components/Status";

/**
 * QueueConfigPanel shows a queue's limits, rate, bound, group policy and
 * push endpoint, and edits them. It reads the configuration twice: effective (the defaults
 * filled in) to show, and as stored (a zero where the queue follows the
 * default) to edit, because a form filled from the effective one would
 * store today's defaults as the queue's own. Saving stores only the
 * settings the form changed (an update_mask).
 */
export function QueueConfigPanel({ queue, fromList }: { queue: string; fromList: QueueConfig | undefined }) {
  const [config, setConfig] = useState<QueueConfig | undefined>();
  const [stored, setStored] = useState<QueueConfig | undefined>();
  const [error, setError] = useState<ConnectError | undefined>();
  const [editing, setEditing] = useState(false);
  const [saved, setSaved] = useState(false);
  const load = () => {
    setError(undefined);
    Promise.all([admin.getQueueConfig({ queue }), admin.getQueueConfig({ queue, stored: true })]).then(
      ([effective, own]) => (setConfig(effective), setStored(own)),
      (e: unknown) => setError(asError(e)),
    );
  };
  useEffect(load, [queue]);
  const shown = config ?? fromList;
  return (
    <section class="panel" aria-labelledby="config-h">
      <div class="panel-head">
        <h2 id="config-h">Configuration</h2>
        {stored && !editing && (
          <button type="button" onClick={() => (setEditing(true), setSaved(false))}>
            Edit configuration
          </button>
        )}
      </div>
      {saved && (
        <Notice kind="ok" onClose={() => setSaved(false)}>
          Configuration saved.
        </Notice>
      )}
      {error && !config && <ErrorBox error={error} what="Could not load the configuration" retry={load} />}
      {!shown ? (
        error ? null : <Loading />
      ) : editing && stored ? (
        <ConfigForm
          config={stored}
          onCancel={() => setEditing(false)}
          onSaved={() => {
            setEditing(false);
            setSaved(true);
            load();
            refreshQueues();
          }}
        />
      ) : (
        <ConfigView config={shown} stored={stored} />
      )}
    </section>
  );
}

/** ConfigView shows the effective configuration, marking what follows a default. */
function ConfigView({ config: c, stored: s }: { config: QueueConfig; stored: QueueConfig | undefined }) {
  const g = c.groupPolicy;
  const sg = s?.groupPolicy;
  // Whether the queue follows the server's default for a group setting
  // (unknown until the stored configuration is read).
  const byDefault = (own: number) => (s !== undefined && own === 0 ? " (server default)" : "");
  return (
    <dl class="kv config">
      <div>
        <dt>Concurrency per key</dt>
        <dd>{c.concurrencyLimit > 1 ? String(c.concurrencyLimit) : "1 (default)"}</dd>
      </div>
      <div>
        <dt>Max active</dt>
        <dd>{c.maxActive === 0 ? "no limit" : String(c.maxActive)}</dd>
      </div>
      <div>
        <dt>Max waiting</dt>
        <dd>{c.maxWaiting === 0n ? "no bound" : String(c.maxWaiting)}</dd>
      </div>
      <div>
        <dt>Rate limit</dt>
        <dd>
          {c.rateLimit && c.rateLimit.perSecond > 0
            ? `${c.rateLimit.perSecond}/s, burst ${c.rateLimit.burst || c.rateLimit.perSecond}`
            : "no limit"}
        </dd>
      </div>
      <div>
        <dt>Group max size</dt>
        <dd>{g && g.maxSize > 0 ? `${g.maxSize}${byDefault(sg?.maxSize ?? 0)}` : "server default"}</dd>
      </div>
      <div>
        <dt>Group max delay</dt>
        <dd>{shownDuration(durationMs(g?.maxDelay), durationMs(sg?.maxDelay), byDefault)}</dd>
      </div>
      <div>
        <dt>Group grace period</dt>
        <dd>{shownDuration(durationMs(g?.gracePeriod), durationMs(sg?.gracePeriod), byDefault)}</dd>
      </div>
      <PushView config={c} stored={s} />
    </dl>
  );
}

/**
 * PushView shows the queue's push endpoint (docs/push.md): none, or its URL
 * with the concurrency and timeout it is pushed with.
 */
function PushView({ config: c, stored: s }: { config: QueueConfig; stored: QueueConfig | undefined }) {
  const p = c.push;
  if (!p || p.url === "") {
    return (
      <div>
        <dt>Push endpoint</dt>
        <dd>none</dd>
      </div>
    );
  }
  // "(default)" where the queue stores 0 (unknown until it is read).
  const byDefault = (own: number) => (s !== undefined && own === 0 ? " (default)" : "");
  return (
    <>
      <div>
        <dt>Push endpoint</dt>
        <dd class="mono">{p.url}</dd>
      </div>
      <div>
        <dt>Push concurrency</dt>
        <dd>{`${p.concurrency}${byDefault(s?.push?.concurrency ?? 0)}`}</dd>
      </div>
      <div>
        <dt>Push timeout</dt>
        <dd>{duration(durationMs(p.timeout)) + byDefault(durationMs(s?.push?.timeout))}</dd>
      </div>
    </>
  );
}

function shownDuration(ms: number, ownMs: number, byDefault: (own: number) => string): string {
  return ms === 0 ? "server default" : duration(ms) + byDefault(ownMs);
}

interface Draft {
  concurrencyLimit: string;
  maxActive: string;
  maxWaiting: string;
  perSecond: string;
  burst: string;
  maxSize: string;
  maxDelay: string;
  gracePeriod: string;
  pushUrl: string;
  pushConcurrency: string;
  pushTimeout: string;
}

function draftOf(c: QueueConfig): Draft {
  const dur = (ms: number) => (ms === 0 ? "" : duration(ms));
  return {
    concurrencyLimit: c.concurrencyLimit ? String(c.concurrencyLimit) : "",
    maxActive: c.maxActive ? String(c.maxActive) : "",
    maxWaiting: c.maxWaiting ? String(c.maxWaiting) : "",
    perSecond: c.rateLimit?.perSecond ? String(c.rateLimit.perSecond) : "",
    burst: c.rateLimit?.burst ? String(c.rateLimit.burst) : "",
    maxSize: c.groupPolicy?.maxSize ? String(c.groupPolicy.maxSize) : "",
    maxDelay: dur(durationMs(c.groupPolicy?.maxDelay)),
    gracePeriod: dur(durationMs(c.groupPolicy?.gracePeriod)),
    pushUrl: c.push?.url ?? "",
    pushConcurrency: c.push?.concurrency ? String(c.push.concurrency) : "",
    pushTimeout: dur(durationMs(c.push?.timeout)),
  };
}

// parse turns the form into a QueueConfig, or names the fields that are wrong.
function parse(queue: string, d: Draft): { config?: QueueConfig; problems: Partial<Record<keyof Draft, string>> } {
  const problems: Partial<Record<keyof Draft, string>> = {};
  const n = (k: keyof Draft, max = 2_147_483_647): number => {
    const s = d[k].trim();
    if (s === "") return 0;
    if (!/^\d+$/.test(s) || Number(s) > max) {
      problems[k] = `a whole number from 0 to ${max}`;
      return 0;
    }
    return Number(s);
  };
  const t = (k: keyof Draft, maxMs = Infinity): number => {
    const ms = parseDuration(d[k]);
    if (ms === undefined || ms > maxMs) {
      problems[k] = `a duration such as 30s, 1m30s or 250ms${maxMs < Infinity ? `, at most ${duration(maxMs)}` : ""}`;
      return 0;
    }
    return ms;
  };
  const u = (k: keyof Draft): string => {
    const s = d[k].trim();
    const problem = urlProblem(s);
    if (problem) problems[k] = problem;
    return s;
  };
  const config = create(QueueConfigSchema, {
    queue,
    concurrencyLimit: n("concurrencyLimit"),
    maxActive: n("maxActive"),
    // The server's bound on max_waiting (server/limits.go MaxQueueWaiting).
    maxWaiting: BigInt(n("maxWaiting", 1_000_000_000)),
    rateLimit: { perSecond: n("perSecond"), burst: n("burst") },
    groupPolicy: {
      maxSize: n("maxSize"),
      maxDelay: durationFromMs(t("maxDelay")),
      gracePeriod: durationFromMs(t("gracePeriod")),
    },
    // The server's bounds on a push endpoint (server/push/endpoint.go).
    push: {
      url: u("pushUrl"),
      concurrency: n("pushConcurrency", 1000),
      timeout: durationFromMs(t("pushTimeout", 3_600_000)),
    },
  });
  return Object.keys(problems).length ? { problems } : { config, problems };
}

/**
 * urlProblem is what is wrong with a push URL, as the server checks it
 * (server/push/endpoint.go), or undefined. Whether the host must be
 * loopback only the server knows (it depends on its push secret), so that
 * it leaves to the server's answer.
 */
function urlProblem(s: string): string | undefined {
  if (s === "") return undefined;
  if (new TextEncoder().encode(s).length > 2048) return "a URL of at most 2048 bytes";
  let url: URL;
  try {
    url = new URL(s);
  } catch {
    return "an http:// or https:// URL";
  }
  if ((url.protocol !== "http:" && url.protocol !== "https:") || url.hostname === "") return "an http:// or https:// URL";
  if (url.username !== "" || url.password !== "") return "a URL without credentials (the server signs its requests instead)";
  if (s.includes("#")) return "a URL without a fragment (#)";
  return undefined;
}

// maskPaths names each field of the form as UpdateQueueConfig's update_mask does.
const maskPaths: Record<keyof Draft, string> = {
  concurrencyLimit: "concurrency_limit",
  maxActive: "max_active",
  maxWaiting: "max_waiting",
  perSecond: "rate_limit.per_second",
  burst: "rate_limit.burst",
  maxSize: "group_policy.max_size",
  maxDelay: "group_policy.max_delay",
  gracePeriod: "group_policy.grace_period",
  pushUrl: "push.url",
  pushConcurrency: "push.concurrency",
  pushTimeout: "push.timeout",
};

/**
 * refusedField is the field of the form a server's invalid_argument names
 * ("config.push.url ... is not a loopback URL"), to mark it invalid.
 */
function refusedField(err: ConnectError | undefined): keyof Draft | undefined {
  if (err?.code !== Code.InvalidArgument) return undefined;
  const named = /\bconfig\.([a-z_.]+)/.exec(err.rawMessage)?.[1];
  return (Object.keys(maskPaths) as (keyof Draft)[]).find((k) => maskPaths[k] === named);
}

const FIELDS: { key: keyof Draft; label: string; help: string; kind: "int" | "dur" | "url" }[] = [
  { key: "concurrencyLimit", label: "Concurrency per key", help: "Tasks sharing one concurrency key that may run at once. Empty or 0: 1.", kind: "int" },
  { key: "maxActive", label: "Max active", help: "Tasks of the queue that may run at once. Empty or 0: no limit.", kind: "int" },
  {
    key: "maxWaiting",
    label: "Max waiting",
    help: "Tasks the queue may hold waiting to run. A producer past it waits up to 5 s for room, then is refused. Empty or 0: no bound.",
    kind: "int",
  },
  { key: "perSecond", label: "Rate (per second)", help: "Dispatches per second. Empty or 0: no limit.", kind: "int" },
  { key: "burst", label: "Burst", help: "Dispatches allowed at once above the rate. Empty or 0: the rate.", kind: "int" },
  { key: "maxSize", label: "Group max size", help: "A group fires once it holds this many tasks. Empty: the server default.", kind: "int" },
  { key: "maxDelay", label: "Group max delay", help: "A group fires this long after its first task. Empty: the server default.", kind: "dur" },
  { key: "gracePeriod", label: "Group grace period", help: "A group fires this long after its latest task. Empty: the server default.", kind: "dur" },
  {
    key: "pushUrl",
    label: "Push URL",
    help: "The HTTP endpoint the server pushes the queue's tasks to. Without a push secret, loopback only. Empty: none.",
    kind: "url",
  },
  { key: "pushConcurrency", label: "Push concurrency", help: "Pushes in flight at once, up to 1000. Empty or 0: 10.", kind: "int" },
  { key: "pushTimeout", label: "Push timeout", help: "The longest one push may take, up to 1h. Empty or 0: 30s.", kind: "dur" },
];

const PLACEHOLDERS = { int: "0", dur: "e.g. 30s", url: "none" };

function ConfigForm({ config, onCancel, onSaved }: { config: QueueConfig; onCancel: () => void; onSaved: () => void }) {
  const [draft, setDraft] = useState<Draft>(() => draftOf(config));
  const [problems, setProblems] = useState<Partial<Record<keyof Draft, string>>>({});
  const [error, setError] = useState<ConnectError | undefined>();
  const [busy, setBusy] = useState(false);
  const refused = refusedField(error);
  const submit = async (e: Event) => {
    e.preventDefault();
    const p = parse(config.queue, draft);
    setProblems(p.problems);
    if (!p.config) return;
    // Only the settings the form changed are stored, so that a change
    // another client made since the form opened stands.
    const start = draftOf(config);
    const paths = FIELDS.filter((f) => draft[f.key] !== start[f.key]).map((f) => maskPaths[f.key]);
    if (paths.length === 0) {
      onSaved();
      return;
    }
    setBusy(true);
    setError(undefined);
    try {
      await admin.updateQueueConfig({ config: p.config, updateMask: { paths } });
      onSaved();
    } catch (err) {
      setError(asError(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="form grid-form" onSubmit={submit} noValidate aria-label="Queue configuration">
      {FIELDS.map((f) => (
        <div class="field" key={f.key}>
          <label for={`qc-${f.key}`}>{f.label}</label>
          <input
            id={`qc-${f.key}`}
            inputMode={f.kind === "int" ? "numeric" : f.kind === "url" ? "url" : "text"}
            value={draft[f.key]}
            placeholder={PLACEHOLDERS[f.kind]}
            onInput={(e) => setDraft({ ...draft, [f.key]: e.currentTarget.value })}
            aria-describedby={`qc-${f.key}-help`}
            aria-invalid={problems[f.key] || refused === f.key ? "true" : undefined}
          />
          <small id={`qc-${f.key}-help`} class={problems[f.key] ? "error-inline" : "muted"}>
            {problems[f.key] ? `Enter ${problems[f.key]}.` : f.help}
          </small>
        </div>
      ))}
      {error && <ErrorBox error={error} what="The configuration was not saved" />}
      <div class="form-actions">
        <button type="submit" class="primary" disabled={busy}>
          {busy ? "Saving…" : "Save"}
        </button>
        <button type="button" onClick={onCancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}
