// The push request handler (createPushHandler) against real HTTP servers on
// loopback, with requests signed here as the Conveyor server signs them
// (Standard Webhooks: HMAC-SHA256 of "<id>.<timestamp>.<body>").
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createHmac, randomBytes } from "node:crypto";
import { request as httpRequest, createServer } from "node:http";
import { connect as http2Connect, createServer as createHttp2Server } from "node:http2";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { create, toJsonString } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import {
  MAX_PUSH_BODY_BYTES,
  PushRequestSchema,
  SkipRetry,
  TaskCanceledError,
  TaskDeadlineError,
  TaskEnvelopeSchema,
  Worker,
  createPushHandler,
} from "../dist/index.js";
import { ReplayGuard } from "../dist/push_replay.js";
import { deferred, text, untilAborted } from "./worker-helpers.mjs";

// The tests decide the secrets; one in the environment would change what "none" means.
delete process.env.CONVEYOR_PUSH_SECRET;

const enc = new TextEncoder();
/** T bounds every test, so that a signal that never aborts fails rather than hangs. */
const T = { timeout: Number(process.env.PUSH_TEST_TIMEOUT_MS || 60_000) };

function newSecret() {
  const key = randomBytes(32);
  return { key, secret: `whsec_${key.toString("base64")}` };
}

const nowSec = () => Math.floor(Date.now() / 1000);
let seq = 0;
const newId = () => `attempt-${process.pid}-${++seq}`;

/** pushBody is the proto3 JSON of a PushRequest, as the server sends it. */
function pushBody({ type = "echo", payload = '{"x":1}', contentType = "", attemptId, deadlineMs = Date.now() + 30_000, options } = {}) {
  return toJsonString(
    PushRequestSchema,
    create(PushRequestSchema, {
      task: create(TaskEnvelopeSchema, {
        id: `task-${attemptId}`,
        type,
        queue: "default",
        payload: typeof payload === "string" ? enc.encode(payload) : payload,
        contentType,
        attemptId,
        options,
      }),
      deadline: deadlineMs === undefined ? undefined : timestampFromMs(deadlineMs),
      attemptId,
    }),
  );
}

/** signed is the request headers of body signed under keys (one entry each) at ts. */
function signed(keys, id, body, ts = nowSec()) {
  const sig = keys
    .map((k) => `v1,${createHmac("sha256", k).update(`${id}.${ts}.${body}`).digest("base64")}`)
    .join(" ");
  return { "content-type": "application/json", "webhook-id": id, "webhook-timestamp": String(ts), "webhook-signature": sig };
}

/** listen serves push.node on a free loopback port. */
async function listen(push) {
  const server = createServer(push.node);
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${server.address().port}/conveyor`;
  return {
    url,
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(resolve));
    },
  };
}

async function post(url, body, headers, method = "POST") {
  const res = await fetch(url, { method, body: method === "GET" ? undefined : body, headers });
  const t = await res.text();
  return { status: res.status, headers: res.headers, text: t, json: res.status === 200 ? JSON.parse(t) : undefined };
}

/** worker makes a push-only Worker with the handlers the tests use. */
function worker() {
  const w = new Worker({});
  w.handle("echo", ({ task }) => task.payload);
  w.handle("string", () => "héllo");
  w.handle("object", () => ({ ok: true, n: 2 }));
  w.handle("nothing", () => undefined);
  w.handle("fail", () => {
    throw new Error("transient boom");
  });
  w.handle("skip", () => {
    throw new SkipRetry("permanent nope");
  });
  w.handleJSON("json", (v) => ({ got: v }));
  w.handle("progress", ({ progress }) => {
    progress(50, "half");
    return "done";
  });
  w.handle("badprogress", ({ progress }) => {
    progress(150);
  });
  w.handleBatch("batched", ({ tasks, group }) => tasks.map((t) => `${group === "" ? "one" : group}:${tasks.length}:${text(t.payload)}`));
  w.handleBatch("batchfail", ({ fail }) => {
    fail(0, new SkipRetry("member refused"));
    return ["ignored"];
  });
  return w;
}

/** withServer runs fn against a node server of a push handler made with opts. */
async function withServer(opts, fn, w = worker()) {
  const s = await listen(createPushHandler(w, opts));
  try {
    await fn(s.url);
  } finally {
    await s.close();
  }
}

/** call sends one signed push request of the given task to url and returns the answer. */
async function call(url, keys, task = {}) {
  const id = newId();
  const body = pushBody({ attemptId: id, ...task });
  return post(url, body, signed(keys, id, body));
}

test("a request signed under either of two secrets is accepted and answered with a PushResponse", T, async () => {
  const a = newSecret();
  const b = newSecret();
  await withServer({ secrets: [a.secret, b.secret] }, async (url) => {
    for (const keys of [[a.key], [b.key], [randomBytes(32), b.key]]) {
      const r = await call(url, keys, { payload: '{"x":1}' });
      assert.equal(r.status, 200, r.text);
      assert.equal(r.headers.get("content-type"), "application/json");
      assert.deepEqual(r.json, { outcome: "TASK_OUTCOME_SUCCESS", result: Buffer.from('{"x":1}').toString("base64") });
    }
  });
});

test("a tampered body, a tampered signature, a signature under another key are refused with 401", T, async () => {
  const a = newSecret();
  await withServer({ secrets: [a.secret] }, async (url) => {
    const id = newId();
    const body = pushBody({ attemptId: id });
    const h = signed([a.key], id, body);
    const tampered = body.replace('"echo"', '"fail"');
    let r = await post(url, tampered, h);
    assert.equal(r.status, 401);
    assert.match(r.text, /webhook-signature has no v1 signature/);
    assert.equal(r.headers.get("content-type"), "text/plain; charset=utf-8");

    const sig = h["webhook-signature"];
    const flipped = sig.slice(0, 10) + (sig[10] === "A" ? "B" : "A") + sig.slice(11);
    r = await post(url, body, { ...h, "webhook-signature": flipped });
    assert.equal(r.status, 401);
    r = await post(url, body, { ...h, "webhook-signature": sig.replace("v1,", "v2,") });
    assert.equal(r.status, 401);
    r = await post(url, body, signed([randomBytes(32)], id, body));
    assert.equal(r.status, 401);
    // Signed for another id or timestamp: the signature covers both.
    r = await post(url, body, { ...h, "webhook-id": `${id}x` });
    assert.equal(r.status, 401);
    // None of those was accepted, so the genuine request still is.
    r = await post(url, body, h);
    assert.equal(r.status, 200, r.text);
  });
});

test("a request missing any of the three headers, or unsigned, is refused with 401 naming it", T, async () => {
  const a = newSecret();
  await withServer({ secrets: [a.secret] }, async (url) => {
    const id = newId();
    const body = pushBody({ attemptId: id });
    const h = signed([a.key], id, body);
    for (const name of ["webhook-id", "webhook-timestamp", "webhook-signature"]) {
      const { [name]: _, ...rest } = h;
      const r = await post(url, body, rest);
      assert.equal(r.status, 401, name);
      assert.match(r.text, new RegExp(`no ${name} header`));
    }
    const r = await post(url, body, { "content-type": "application/json" });
    assert.equal(r.status, 401);
    assert.match(r.text, /not signed/);
    const bad = await post(url, body, { ...h, "webhook-timestamp": "soon" });
    assert.equal(bad.status, 401);
    assert.match(bad.text, /webhook-timestamp "soon" is not Unix seconds/);
  });
});

test("a timestamp 6 minutes old or 6 minutes ahead is refused with 401", T, async () => {
  const a = newSecret();
  await withServer({ secrets: [a.secret] }, async (url) => {
    for (const [ts, re] of [[nowSec() - 360, /s old/], [nowSec() + 360, /s in the future/]]) {
      const id = newId();
      const body = pushBody({ attemptId: id });
      const r = await post(url, body, signed([a.key], id, body, ts));
      assert.equal(r.status, 401);
      assert.match(r.text, re);
    }
    // Within the tolerance either way: accepted.
    for (const ts of [nowSec() - 200, nowSec() + 200]) {
      const id = newId();
      const body = pushBody({ attemptId: id });
      assert.equal((await post(url, body, signed([a.key], id, body, ts))).status, 200);
    }
  });
});

test("a replayed request is refused with 409", T, async () => {
  const a = newSecret();
  await withServer({ secrets: [a.secret] }, async (url) => {
    const id = newId();
    const body = pushBody({ attemptId: id });
    const h = signed([a.key], id, body);
    assert.equal((await post(url, body, h)).status, 200);
    const again = await post(url, body, h);
    assert.equal(again.status, 409);
    assert.match(again.text, /was accepted before: a replay/);
    // Re-signed with a new timestamp, the same id is still a replay.
    assert.equal((await post(url, body, signed([a.key], id, body, nowSec() - 1))).status, 409);
  });
});

test("the replay memory is bounded and refuses what it can no longer tell from a first arrival", T, () => {
  const g = new ReplayGuard(1000, 3);
  const t = 1_000_000;
  assert.equal(g.admit("a", t, t), "new");
  assert.equal(g.admit("a", t, t), "replay");
  assert.equal(g.admit("b", t + 1, t), "new");
  assert.equal(g.admit("c", t + 2, t), "new");
  assert.equal(g.admit("d", t + 3, t), "new"); // forgets a
  assert.equal(g.size, 3);
  assert.equal(g.admit("a", t, t), "forgotten");
  assert.equal(g.admit("e", t - 5, t), "forgotten");
  assert.equal(g.admit("d", t + 3, t), "replay");
  // Past the window every id expires and is swept.
  assert.equal(g.admit("f", t + 5000, t + 3000), "new");
  assert.equal(g.size, 1);
});

test("attempt_id must be the webhook-id, and a body that is not a PushRequest is refused with 400", T, async () => {
  const a = newSecret();
  await withServer({ secrets: [a.secret] }, async (url) => {
    const id = newId();
    const body = pushBody({ attemptId: "another" });
    let r = await post(url, body, signed([a.key], id, body));
    assert.equal(r.status, 400);
    assert.match(r.text, /attempt_id "another" is not the webhook-id/);
    for (const [raw, re] of [["not json", /not JSON/], ['{"task": 5}', /not a PushRequest/], ['{"attemptId":"x"}', /no task/]]) {
      const i = newId();
      const b = raw.replace('"x"', JSON.stringify(i));
      r = await post(url, b, signed([a.key], i, b));
      assert.equal(r.status, 400, raw);
      assert.match(r.text, re);
    }
    // Unknown fields are ignored.
    const i = newId();
    const b = JSON.stringify({ ...JSON.parse(pushBody({ attemptId: i })), futureField: 1 });
    r = await post(url, b, signed([a.key], i, b));
    assert.equal(r.status, 200, r.text);
  });
});

test("creation refuses to start with no secret and no developmentMode, and names a bad secret", T, () => {
  const w = worker();
  assert.throws(() => createPushHandler(w), /needs a secret \(options.secrets or CONVEYOR_PUSH_SECRET\)/);
  assert.throws(() => createPushHandler(w, { secrets: [] }), /needs a secret/);
  const good = newSecret().secret;
  assert.throws(() => createPushHandler(w, { secrets: [good, "secret"] }), /push secret secrets\[1\] must be written whsec_/);
  assert.throws(() => createPushHandler(w, { secrets: ["whsec_!!!!"] }), /secrets\[0\] is not standard base64/);
  const short = `whsec_${randomBytes(16).toString("base64")}`;
  assert.throws(() => createPushHandler(w, { secrets: [short] }), /16-byte key; a key has 24 to 64 bytes/);
  assert.throws(() => createPushHandler(w, { secrets: [good], toleranceMs: 0 }), /toleranceMs/);
  process.env.CONVEYOR_PUSH_SECRET = `${good},whsec_x`;
  try {
    assert.throws(() => createPushHandler(w), /CONVEYOR_PUSH_SECRET entry 2 is not standard base64/);
  } finally {
    delete process.env.CONVEYOR_PUSH_SECRET;
  }
  // The error never carries the secret itself.
  try {
    createPushHandler(w, { secrets: [short] });
  } catch (err) {
    assert.ok(!err.message.includes(short.slice(6)));
  }
});

test("with no secrets given, CONVEYOR_PUSH_SECRET's are used", T, async () => {
  const a = newSecret();
  const b = newSecret();
  process.env.CONVEYOR_PUSH_SECRET = `${a.secret}, ${b.secret}`;
  let push;
  try {
    push = createPushHandler(worker());
  } finally {
    delete process.env.CONVEYOR_PUSH_SECRET;
  }
  const s = await listen(push);
  try {
    assert.equal((await call(s.url, [b.key])).status, 200);
    assert.equal((await call(s.url, [randomBytes(32)])).status, 401);
  } finally {
    await s.close();
  }
});

test("developmentMode accepts unsigned requests, and never unverifies a configured secret", T, async () => {
  await withServer({ developmentMode: true }, async (url) => {
    const id = newId();
    const r = await post(url, pushBody({ attemptId: id }), { "content-type": "application/json" });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.outcome, "TASK_OUTCOME_SUCCESS");
  });
  const a = newSecret();
  await withServer({ developmentMode: true, secrets: [a.secret] }, async (url) => {
    const r = await post(url, pushBody({ attemptId: newId() }), { "content-type": "application/json" });
    assert.equal(r.status, 401);
  });
});

test("every outcome maps as the session worker maps it", T, async () => {
  const a = newSecret();
  await withServer({ secrets: [a.secret] }, async (url) => {
    const b64 = (s) => Buffer.from(s).toString("base64");
    const cases = [
      [{ type: "echo", payload: new Uint8Array([0, 255, 1]) }, { outcome: "TASK_OUTCOME_SUCCESS", result: "AP8B" }],
      [{ type: "string" }, { outcome: "TASK_OUTCOME_SUCCESS", result: b64("héllo") }],
      [{ type: "object" }, { outcome: "TASK_OUTCOME_SUCCESS", result: b64('{"ok":true,"n":2}') }],
      [{ type: "nothing" }, { outcome: "TASK_OUTCOME_SUCCESS" }],
      [{ type: "fail" }, { outcome: "TASK_OUTCOME_RETRY", errorMsg: "transient boom" }],
      [{ type: "skip" }, { outcome: "TASK_OUTCOME_SKIP_RETRY", errorMsg: "permanent nope" }],
      [{ type: "json", payload: '{"a":[1]}', contentType: "application/json" }, { outcome: "TASK_OUTCOME_SUCCESS", result: b64('{"got":{"a":[1]}}') }],
      [{ type: "progress" }, { outcome: "TASK_OUTCOME_SUCCESS", result: b64("done") }],
      [{ type: "batched", payload: "p" }, { outcome: "TASK_OUTCOME_SUCCESS", result: b64("one:1:p") }],
      [{ type: "batchfail" }, { outcome: "TASK_OUTCOME_SKIP_RETRY", errorMsg: "member refused" }],
    ];
    for (const [task, want] of cases) {
      const r = await call(url, [a.key], task);
      assert.equal(r.status, 200, `${task.type}: ${r.text}`);
      assert.deepEqual(r.json, want, task.type);
    }
    let r = await call(url, [a.key], { type: "json", payload: "abc", contentType: "application/octet-stream" });
    assert.equal(r.json.outcome, "TASK_OUTCOME_SKIP_RETRY");
    assert.match(r.json.errorMsg, /has content type "application\/octet-stream"; this handler decodes only application\/json/);
    r = await call(url, [a.key], { type: "json", payload: "{not json" });
    assert.equal(r.json.outcome, "TASK_OUTCOME_SKIP_RETRY");
    assert.match(r.json.errorMsg, /decode the JSON payload/);
    r = await call(url, [a.key], { type: "nobody" });
    assert.equal(r.json.outcome, "TASK_OUTCOME_RETRY");
    assert.match(r.json.errorMsg, /no handler for task type "nobody"/);
    r = await call(url, [a.key], { type: "badprogress" });
    assert.equal(r.json.outcome, "TASK_OUTCOME_RETRY");
    assert.match(r.json.errorMsg, /progress percent 150/);
  });
});

test("a pushed at-most-once task is answered RELEASED without running", T, async () => {
  const a = newSecret();
  let ran = 0;
  const w = worker();
  w.handle("counted", () => {
    ran++;
  });
  await withServer({ secrets: [a.secret] }, async (url) => {
    const r = await call(url, [a.key], { type: "counted", options: { atMostOnce: true } });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.outcome, "TASK_OUTCOME_RELEASED");
    assert.match(r.json.errorMsg, /push endpoints do not run at-most-once tasks/);
    const plain = await call(url, [a.key], { type: "counted" });
    assert.equal(plain.json.outcome, "TASK_OUTCOME_SUCCESS");
    assert.equal(ran, 1, "only the plain task ran");
  }, w);
});

test("the handler's signal aborts at PushRequest.deadline, and a deadline already passed runs nothing", T, async () => {
  const a = newSecret();
  const w = new Worker({});
  const seen = deferred();
  let runs = 0;
  w.handle("wait", async ({ signal, deadline }) => {
    runs++;
    seen.resolve(deadline);
    throw await untilAborted(signal);
  });
  await withServer({ secrets: [a.secret] }, async (url) => {
    const dl = Date.now() + 300;
    const r = await call(url, [a.key], { type: "wait", deadlineMs: dl });
    assert.equal(r.status, 200);
    assert.deepEqual(r.json, { outcome: "TASK_OUTCOME_RETRY", errorMsg: "task deadline exceeded" });
    assert.ok((await seen.promise) instanceof Date);
    const late = await call(url, [a.key], { type: "wait", deadlineMs: Date.now() - 60_000 });
    assert.equal(late.json.outcome, "TASK_OUTCOME_RETRY");
    assert.match(late.json.errorMsg, /deadline exceeded before the handler started/);
    assert.equal(runs, 1);
  }, w);
});

test("the handler's signal aborts when the client closes the request", T, async () => {
  const a = newSecret();
  const w = new Worker({});
  const started = deferred();
  const reason = deferred();
  w.handle("wait", async ({ signal }) => {
    started.resolve();
    const r = await untilAborted(signal);
    reason.resolve(r);
    throw r;
  });
  await withServer({ secrets: [a.secret] }, async (url) => {
    const id = newId();
    const body = pushBody({ type: "wait", attemptId: id, deadlineMs: Date.now() + 600_000 });
    const req = httpRequest(url, { method: "POST", headers: signed([a.key], id, body) });
    req.on("error", () => {});
    req.end(body);
    await started.promise;
    req.destroy();
    const r = await reason.promise;
    assert.ok(r instanceof TaskCanceledError, String(r));
    assert.ok(!(r instanceof TaskDeadlineError));
  }, w);
});

test("a body over 8 MiB is refused with 413, by its Content-Length or as it streams", T, async () => {
  const a = newSecret();
  const push = createPushHandler(worker(), { secrets: [a.secret] });
  const s = await listen(push);
  try {
    const id = newId();
    const h = signed([a.key], id, "x");
    // Only the headers are sent: the answer must come from Content-Length alone.
    const status = await new Promise((resolve, reject) => {
      const req = httpRequest(s.url, { method: "POST", headers: { ...h, "content-length": String(MAX_PUSH_BODY_BYTES + 1) } });
      req.on("response", (res) => {
        resolve(res.statusCode);
        req.destroy();
      });
      req.on("error", reject);
      req.flushHeaders();
    });
    assert.equal(status, 413);
    // A chunked body with no Content-Length: refused once 8 MiB are read.
    // The request is never ended: the answer must come while it streams.
    const streamed = await new Promise((resolve, reject) => {
      const req = httpRequest(s.url, { method: "POST", headers: signed([a.key], newId(), "x") });
      req.on("response", (res) => {
        resolve(res.statusCode);
        req.destroy();
      });
      req.on("error", reject);
      const mib = Buffer.alloc(1 << 20);
      for (let i = 0; i <= MAX_PUSH_BODY_BYTES / mib.length; i++) req.write(mib);
    });
    assert.equal(streamed, 413);
  } finally {
    await s.close();
  }
  // A streamed body with no Content-Length, through the fetch face.
  const big = new Uint8Array(1 << 20);
  let sent = 0;
  const stream = new ReadableStream({
    pull(c) {
      if (sent > MAX_PUSH_BODY_BYTES) return c.close();
      sent += big.length;
      c.enqueue(big);
    },
  });
  const id = newId();
  const res = await push.fetch(new Request("http://push.test/", { method: "POST", body: stream, duplex: "half", headers: signed([a.key], id, "x") }));
  assert.equal(res.status, 413);
  assert.match(await res.text(), /more than the 8388608 bytes|longer than the 8388608 bytes/);
  assert.ok(sent <= MAX_PUSH_BODY_BYTES + 2 * big.length, "read no further than the bound");
});

test("a method other than POST is refused with 405 and Allow: POST", T, async () => {
  const a = newSecret();
  await withServer({ secrets: [a.secret] }, async (url) => {
    for (const method of ["GET", "PUT"]) {
      const r = await post(url, "{}", {}, method);
      assert.equal(r.status, 405);
      assert.equal(r.headers.get("allow"), "POST");
      assert.match(r.text, new RegExp(`method ${method} is not allowed`));
    }
  });
});

test("the fetch face answers a constructed Request as the Node face does", T, async () => {
  const a = newSecret();
  const w = worker();
  const push = createPushHandler(w, { secrets: [a.secret] });
  const id = newId();
  const body = pushBody({ attemptId: id, payload: "héllo ✓" });
  const req = () => new Request("https://example.test/api/conveyor", { method: "POST", body, headers: signed([a.key], id, body) });
  const res = await push.fetch(req());
  assert.equal(res.status, 200);
  assert.equal(res.headers.get("content-type"), "application/json");
  const json = await res.json();
  assert.equal(json.outcome, "TASK_OUTCOME_SUCCESS");
  assert.equal(Buffer.from(json.result, "base64").toString(), "héllo ✓");
  assert.equal((await push.fetch(req())).status, 409);
  assert.equal((await push.fetch(new Request("https://example.test/", { method: "POST", body }))).status, 401);
  assert.equal((await push.fetch(new Request("https://example.test/"))).status, 405);

  // The request's signal, as a runtime aborts it when the client goes, reaches the handler.
  const started = deferred();
  w.handle("wait", async ({ signal }) => {
    started.resolve();
    throw await untilAborted(signal);
  });
  const ctl = new AbortController();
  const wid = newId();
  const wbody = pushBody({ type: "wait", attemptId: wid, deadlineMs: Date.now() + 600_000 });
  const pending = push.fetch(new Request("https://example.test/", { method: "POST", body: wbody, headers: signed([a.key], wid, wbody), signal: ctl.signal }));
  await started.promise;
  ctl.abort();
  const out = await (await pending).json();
  assert.equal(out.outcome, "TASK_OUTCOME_RETRY");
  assert.match(out.errorMsg, /push request was closed/);
});

test("the Node face serves node:http2's compatibility API", T, async () => {
  const a = newSecret();
  const server = createHttp2Server(createPushHandler(worker(), { secrets: [a.secret] }).node);
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const session = http2Connect(`http://127.0.0.1:${server.address().port}`);
  const send = (headers, body) =>
    new Promise((resolve, reject) => {
      const st = session.request({ ":method": "POST", ":path": "/", ...headers });
      let status = 0;
      let data = "";
      st.on("response", (h) => (status = h[":status"]));
      st.setEncoding("utf8");
      st.on("data", (d) => (data += d));
      st.on("end", () => {
        resolve({ status, data });
        st.close(); // a body never sent (body undefined) is abandoned here
      });
      st.on("error", reject);
      if (body !== undefined) st.end(body);
    });
  try {
    const id = newId();
    const body = pushBody({ attemptId: id });
    const ok = await send(signed([a.key], id, body), body);
    assert.equal(ok.status, 200, ok.data);
    assert.equal(JSON.parse(ok.data).outcome, "TASK_OUTCOME_SUCCESS");
    // Only the headers are sent: the answer comes from content-length alone.
    const big = await send({ ...signed([a.key], newId(), "x"), "content-length": String(MAX_PUSH_BODY_BYTES + 1) });
    assert.equal(big.status, 413);
  } finally {
    session.close();
    await new Promise((resolve) => server.close(resolve));
  }
});

test("a Worker made with no url serves push requests and refuses to run sessions", T, () => {
  const w = new Worker({});
  assert.throws(() => w.run(), /Worker.run needs WorkerOptions.url/);
  assert.throws(() => new Worker({ url: "" }), /is not a URL/);
});

const script = join(dirname(fileURLToPath(import.meta.url)), "../conformance/pushworker.mjs");

function startPushWorker(env) {
  const child = spawn(process.execPath, [script], {
    env: { ...process.env, CONVEYOR_PUSH_SECRET: "", CONVEYOR_PUSH_DEV: "", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let err = "";
  child.stderr.on("data", (d) => (err += d));
  const lines = createInterface({ input: child.stdout });
  const out = [];
  const first = new Promise((resolve) => lines.once("line", resolve));
  lines.on("line", (l) => out.push(l));
  const exited = new Promise((resolve) => child.once("exit", (code) => resolve(code)));
  return { child, first, out, exited, stderr: () => err };
}

test("conformance/pushworker.mjs answers a signed conformance.echo with the payload unchanged and exits 0 on SIGTERM", T, async () => {
  const a = newSecret();
  const w = startPushWorker({ CONVEYOR_PUSH_SECRET: a.secret });
  try {
    const line = await Promise.race([w.first, w.exited.then((c) => `exited ${c}: ${w.stderr()}`)]);
    assert.match(line, /^listening http:\/\/127\.0\.0\.1:\d+$/);
    const url = line.slice("listening ".length);
    const payload = enc.encode('{"text":"héllo ✓ 𝄞","big":9007199254740993,"huge":123456789012345678901234567890, "sp" : [ 1 ]}');
    const r = await call(url, [a.key], { type: "conformance.echo", payload, contentType: "application/json" });
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.outcome, "TASK_OUTCOME_SUCCESS");
    assert.deepEqual(new Uint8Array(Buffer.from(r.json.result, "base64")), payload);
    const skip = await call(url, [a.key], { type: "conformance.skip", payload: '{"message":"nope"}' });
    assert.deepEqual(skip.json, { outcome: "TASK_OUTCOME_SKIP_RETRY", errorMsg: "nope" });
    assert.equal((await post(url, "{}", { "content-type": "application/json" })).status, 401);
  } finally {
    w.child.kill("SIGTERM");
  }
  assert.equal(await w.exited, 0, w.stderr());
  assert.equal(w.out.length, 1, "nothing but the listening line on stdout");
});

test("conformance/pushworker.mjs exits 2 with no secret, and serves unsigned requests with CONVEYOR_PUSH_DEV=1", T, async () => {
  const none = startPushWorker({});
  assert.equal(await none.exited, 2);
  assert.match(none.stderr(), /needs a secret/);
  const bad = startPushWorker({ CONVEYOR_PUSH_SECRET: "whsec_short" });
  assert.equal(await bad.exited, 2);
  assert.match(bad.stderr(), /CONVEYOR_PUSH_SECRET entry 1/);

  const dev = startPushWorker({ CONVEYOR_PUSH_DEV: "1" });
  try {
    const url = (await dev.first).slice("listening ".length);
    const r = await post(url, pushBody({ type: "conformance.echo", attemptId: newId(), payload: "[1]" }), { "content-type": "application/json" });
    assert.equal(r.status, 200, r.text);
    assert.equal(Buffer.from(r.json.result, "base64").toString(), "[1]");
  } finally {
    dev.child.kill("SIGTERM");
  }
  assert.equal(await dev.exited, 0, dev.stderr());
});
