// The Inspector tests' shared setup: one real server per test file, a
// Client to enqueue with and the Inspector under test.
import { after, before } from "node:test";
import { Client, Inspector } from "../dist/index.js";
import { startServer } from "./server.mjs";

/**
 * inspectorEnv starts a server before the file's tests and stops it after
 * them. The returned object's server, client and insp are set once the
 * tests run.
 */
export function inspectorEnv() {
  const env = { server: undefined, client: undefined, insp: undefined };
  before(async () => {
    env.server = await startServer();
    env.client = new Client({ url: env.server.url, batching: false });
    env.insp = new Inspector({ url: env.server.url });
  });
  after(async () => {
    await env.client?.close();
    await env.server?.cleanup();
  });
  return env;
}
