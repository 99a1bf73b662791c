// What a real server of this version cannot provoke: a server older than
// per-item error codes, whose EnqueueBatch results say why an item failed
// but not with which code. A small fake TaskService stands in for it.
import assert from "node:assert/strict";
import http2 from "node:http2";
import { after, before, test } from "node:test";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { AlreadyExistsError, Client, TaskInfoSchema, TaskService } from "../dist/index.js";

let server;
let url;
const calls = { enqueue: 0, batch: 0 };
const sessions = new Set();

before(async () => {
  let next = 0;
  const handler = connectNodeAdapter({
    routes(router) {
      router.service(TaskService, {
        async enqueue(req) {
          calls.enqueue++;
          if (req.type === "dup") throw new ConnectError("task exists", Code.AlreadyExists);
          return { task: create(TaskInfoSchema, { id: `T${next++}`, type: req.type }) };
        },
        async enqueueBatch(req) {
          calls.batch++;
          return {
            results: req.items.map((item) =>
              item.type === "dup" ? { error: "task exists" } : { task: create(TaskInfoSchema, { id: `T${next++}`, type: item.type }) },
            ),
          };
        },
      });
    },
  });
  server = http2.createServer(handler);
  server.on("session", (s) => sessions.add(s));
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  url = `http://127.0.0.1:${server.address().port}`;
});
after(async () => {
  for (const s of sessions) s.destroy(); // the client's idle connection stays open
  await new Promise((r) => server.close(r));
});

test("an item failed without a code is sent again alone, for its typed error", async () => {
  const c = new Client({ url, enqueueInFlight: 1, protocol: "connect" });
  const first = c.enqueue("ok");
  const gathered = [c.enqueue("ok"), c.enqueue("dup"), c.enqueue("ok")];
  await first;
  const [a, dup, b] = await Promise.allSettled(gathered);
  assert.equal(calls.batch, 1, "the three calls shared one EnqueueBatch");
  assert.equal(a.status, "fulfilled");
  assert.equal(b.status, "fulfilled");
  assert.ok(dup.reason instanceof AlreadyExistsError, `${dup.reason}`);
  assert.equal(calls.enqueue, 2, "the first call and the uncoded item's retry");
  await c.close();
});
