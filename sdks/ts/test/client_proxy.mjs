// A counting HTTP/2 (h2c) proxy in front of a real server: it forwards
// every stream unchanged and counts the requests by path, so a test can
// tell how many RPCs a client really made without trusting the client.
import http2 from "node:http2";

/** startCountingProxy resolves with {url, count(path), close()} for target (an http:// URL). */
export async function startCountingProxy(target) {
  const counts = new Map();
  const upstream = http2.connect(target);
  const server = http2.createServer();
  const sessions = new Set();
  server.on("session", (s) => {
    sessions.add(s);
    s.on("close", () => sessions.delete(s));
  });
  server.on("stream", (stream, headers) => {
    const path = headers[":path"];
    counts.set(path, (counts.get(path) ?? 0) + 1);
    const forward = {};
    for (const [k, v] of Object.entries(headers)) if (k !== ":authority" && k !== ":scheme") forward[k] = v;
    const up = upstream.request(forward);
    let trailers;
    up.on("response", (h) => stream.respond(h, { waitForTrailers: true }));
    up.on("trailers", (t) => {
      trailers = t;
    });
    stream.on("wantTrailers", () => stream.sendTrailers(trailers ?? {}));
    stream.pipe(up);
    up.pipe(stream);
    up.on("error", () => stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR));
    stream.on("error", () => up.close(http2.constants.NGHTTP2_CANCEL));
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    /** count is how many requests to the path the proxy forwarded. */
    count: (path) => counts.get(path) ?? 0,
    /** connections is how many client connections are open to the proxy. */
    connections: () => sessions.size,
    async close() {
      // The client's connection may stay open (an idle one is only unref'd): cut it.
      for (const s of sessions) s.destroy();
      upstream.destroy();
      await new Promise((r) => server.close(r));
    },
  };
}
