// The Client and the AdminService client over TLS with a bearer token,
// against a real server started with a certificate made for the test.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { Client, UnauthenticatedError, createAdminClient, toConveyorError } from "../dist/index.js";
import { startServer } from "./server.mjs";
import { rejects } from "./client-helpers.mjs";

let server;
let dir;
let ca;

/** selfSigned writes a self-signed certificate for 127.0.0.1 with openssl; false when openssl is missing. */
function selfSigned(dir) {
  try {
    execFileSync(
      "openssl",
      [
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", join(dir, "key.pem"), "-out", join(dir, "cert.pem"), "-days", "1",
        "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
      ],
      { stdio: "ignore" },
    );
    return true;
  } catch {
    return false;
  }
}

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "conveyor-ts-tls-"));
  if (!selfSigned(dir)) return;
  ca = readFileSync(join(dir, "cert.pem"));
  server = await startServer(["--token", "sesame", "--tls-cert", join(dir, "cert.pem"), "--tls-key", join(dir, "key.pem")]);
});
after(async () => {
  await server?.cleanup();
  rmSync(dir, { recursive: true, force: true });
});

for (const protocol of ["grpc", "connect"]) {
  test(`token and TLS (${protocol})`, { skip: !ca && "openssl is not installed" }, async () => {
    assert.match(server.url, /^https:\/\//);
    const c = new Client({ url: server.url, token: "sesame", tlsCa: ca, protocol });
    const t = await c.enqueueJSON("tls", { ok: true }, { queue: "secure" });
    assert.equal((await c.getTask(t.id)).queue, "secure");
    const gathered = await Promise.all(Array.from({ length: 50 }, (_, i) => c.enqueueJSON("tls", { i })));
    assert.equal(new Set(gathered.map((x) => x.id)).size, 50);

    const wrong = new Client({ url: server.url, token: "nope", tlsCa: ca, protocol });
    const err = await rejects(wrong.enqueue("tls"));
    assert.ok(err instanceof UnauthenticatedError, `${err}`);
    const batchErr = await rejects(Promise.all([wrong.enqueue("a"), wrong.enqueue("b"), wrong.enqueue("c")]));
    assert.ok(batchErr instanceof UnauthenticatedError, `${batchErr}`);

    const untrusted = new Client({ url: server.url, token: "sesame", protocol });
    const tlsErr = await rejects(untrusted.getTask(t.id));
    // Connect for Node reports a refused certificate as internal.
    assert.match(tlsErr.message, /certificate/, `${tlsErr}`);

    const admin = createAdminClient({ url: server.url, token: "sesame", tlsCa: ca, protocol });
    const queues = await admin.listQueues({});
    assert.ok(
      queues.queues.some((q) => q.name === "secure"),
      JSON.stringify(queues.queues.map((q) => q.name)),
    );
    const denied = createAdminClient({ url: server.url, token: "nope", tlsCa: ca, protocol });
    const adminErr = toConveyorError(await rejects(denied.listQueues({})));
    assert.ok(adminErr instanceof UnauthenticatedError, `${adminErr}`);
    await c.close();
  });
}
