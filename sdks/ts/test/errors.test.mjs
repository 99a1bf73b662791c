import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { createClient } from "@connectrpc/connect";
import {
  AlreadyExistsError,
  InvalidArgumentError,
  NotFoundError,
  TaskService,
  UnauthenticatedError,
  createTransport,
  toConveyorError,
} from "../dist/index.js";
import { startServer } from "./server.mjs";

let server;
before(async () => {
  server = await startServer(["--token", "secret"]);
});
after(async () => {
  await server?.cleanup();
});

async function code(promise) {
  try {
    await promise;
  } catch (err) {
    return toConveyorError(err);
  }
  assert.fail("the call succeeded");
}

for (const protocol of ["grpc", "connect"]) {
  test(`errors by code over ${protocol}`, async () => {
    const ok = createClient(TaskService, createTransport({ url: server.url, token: "secret", protocol }));
    const bad = createClient(TaskService, createTransport({ url: server.url, token: "wrong", protocol }));

    const unauth = await code(bad.getTask({ id: "x" }));
    assert.ok(unauth instanceof UnauthenticatedError, `${unauth}`);
    assert.equal(unauth.code, "unauthenticated");

    const invalid = await code(ok.enqueue({ queue: "default" }));
    assert.ok(invalid instanceof InvalidArgumentError, `${invalid}`);
    assert.match(invalid.message, /type/);

    const missing = await code(ok.getTask({ id: "01J00000000000000000000000" }));
    assert.ok(missing instanceof NotFoundError, `${missing}`);

    const id = protocol === "grpc" ? "01J0000000000000000000000A" : "01J0000000000000000000000B";
    const first = await ok.enqueue({ type: "t", taskId: id });
    assert.equal(first.task?.id, id);
    const dup = await code(ok.enqueue({ type: "t", taskId: id }));
    assert.ok(dup instanceof AlreadyExistsError, `${dup}`);
  });
}

test("a URL that is not http or https is refused", () => {
  assert.throws(() => createTransport({ url: "ftp://x" }), /must start with http:\/\/ or https:\/\//);
  assert.throws(() => createTransport({ url: "nope" }), /is not a URL/);
});
