// A small WorkerService peer for the Worker's wire tests: a real HTTP/2
// server in this process, serving Session with frames the test sends one
// by one, recording every frame the worker sends. The real server cannot
// be made to send a Ping, a StartDecision for an attempt it never
// dispatched, or a refusal on cue; this peer can.
import http2 from "node:http2";
import { ConnectError, Code } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { WorkerService } from "../dist/index.js";

/**
 * fakeServer serves WorkerService.Session with the given handler (an async
 * generator over the worker's frames) on a loopback port.
 */
export async function fakeServer(session) {
  const server = http2.createServer(
    connectNodeAdapter({ routes: (router) => router.service(WorkerService, { session }) }),
  );
  const sessions = new Set();
  server.on("session", (s) => {
    sessions.add(s);
    s.once("close", () => sessions.delete(s));
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise((resolve) => {
        server.close(resolve);
        for (const s of sessions) s.destroy();
      }),
  };
}

/**
 * PeerSession is one Session stream seen from the server's side: the
 * frames the worker sent (received, in order; hello is the first) and the
 * frames the test sends it (send).
 */
class PeerSession {
  received = [];
  hello;
  #out = [];
  #outWake;
  #ended = false;
  #endError;
  #listeners = new Set();
  #requestDone;
  /** requestEnded resolves when the worker's side of the stream has ended. */
  requestEnded = new Promise((resolve) => (this.#requestDone = resolve));

  /** pump reads the worker's frames until its side ends, then ends the stream as a server does. */
  async pump(requests) {
    try {
      for await (const msg of requests) {
        this.received.push(msg.frame);
        for (const l of this.#listeners) l();
      }
    } catch {
      // The connection went: the same end as a closed side.
    }
    this.#requestDone();
    this.end();
  }

  /** send queues one ServerMessage frame ({ case, value }). */
  send(frame) {
    this.#out.push({ frame });
    this.#outWake?.();
  }

  /** welcome sends a Welcome asking for a heartbeat every 50 ms. */
  welcome(sessionId = "S1") {
    this.send({ case: "welcome", value: { sessionId, heartbeatInterval: { nanos: 50_000_000 } } });
  }

  /** end ends the server's side: cleanly, or with a ConnectError of code unavailable if err is set. */
  end(err) {
    if (this.#ended) return;
    this.#ended = true;
    this.#endError = err;
    this.#outWake?.();
  }

  /** outgoing yields what send queued until end. */
  async *outgoing() {
    for (;;) {
      while (this.#out.length > 0) yield this.#out.shift();
      if (this.#ended) break;
      await new Promise((resolve) => (this.#outWake = resolve));
      this.#outWake = undefined;
    }
    if (this.#endError) throw new ConnectError(this.#endError, Code.Unavailable);
  }

  /** mark is the number of frames received so far, for until's from. */
  mark() {
    return this.received.length;
  }

  /**
   * until resolves with the first frame at index from or later that pred
   * accepts, waiting for it at most ms.
   */
  until(pred, what, from = 0, ms = 10_000) {
    return new Promise((resolve, reject) => {
      let i = from;
      const check = () => {
        for (; i < this.received.length; i++) {
          if (pred(this.received[i])) {
            done();
            resolve(this.received[i]);
            return;
          }
        }
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`timed out waiting for ${what}; frames: ${this.received.map((f) => f.case).join(" ")}`));
      }, ms);
      const done = () => {
        clearTimeout(timer);
        this.#listeners.delete(check);
      };
      this.#listeners.add(check);
      check();
    });
  }

  /** frames lists the received frames of one case. */
  frames(kind) {
    return this.received.filter((f) => f.case === kind).map((f) => f.value);
  }
}

/**
 * startPeer starts a fake server whose sessions the test takes one at a
 * time with next(): the worker's Hello has arrived, nothing was sent yet.
 */
export async function startPeer() {
  const ready = [];
  const waiting = [];
  const server = await fakeServer(async function* (requests) {
    const s = new PeerSession();
    const it = requests[Symbol.asyncIterator]();
    const first = await it.next();
    if (first.done) return;
    s.hello = first.value.frame;
    void s.pump({ [Symbol.asyncIterator]: () => it });
    const w = waiting.shift();
    if (w) w(s);
    else ready.push(s);
    yield* s.outgoing();
  });
  return {
    url: server.url,
    close: server.close,
    /** next resolves with the next session the worker opens. */
    next: () => {
      const s = ready.shift();
      if (s) return Promise.resolve(s);
      return new Promise((resolve) => waiting.push(resolve));
    },
  };
}

/** heartbeatFor accepts a Heartbeat frame that lists attempt. */
export const heartbeatFor = (attempt) => (f) => f.case === "heartbeat" && f.value.activeAttemptIds.includes(attempt);

/** heartbeatWithout accepts a Heartbeat frame that does not list attempt. */
export const heartbeatWithout = (attempt) => (f) => f.case === "heartbeat" && !f.value.activeAttemptIds.includes(attempt);

/** resultFor accepts a Result frame of task. */
export const resultFor = (taskId) => (f) => f.case === "result" && f.value.taskId === taskId;

/**
 * scripted is a Session handler that sends welcome, then each step
 * [frames, want, then]: its frames, then it waits until want Results in
 * all are in (a BatchResult's count one each) and calls then. It resolves
 * results with them all, in the order they came.
 */
export function scripted(welcome, steps, results) {
  return async function* (requests) {
    const it = requests[Symbol.asyncIterator]();
    await it.next(); // Hello
    yield { frame: { case: "welcome", value: welcome } };
    const got = [];
    for (const [frames, want, then] of steps) {
      for (const f of frames) yield f;
      while (got.length < want) {
        const r = await it.next();
        if (r.done) return;
        const f = r.value.frame;
        if (f.case === "result") got.push(f.value);
        if (f.case === "batchResult") got.push(...f.value.results);
      }
      then?.();
    }
    results.resolve(got);
    while (!(await it.next()).done); // hold the stream until the worker's drain closes its side
  };
}
