// A real `conveyor server` process for the SDK's tests: built from this
// repository with `go build` (cached, so cheap after the first time) unless
// CONVEYOR_BIN names a binary, on a free loopback port and a temporary
// data directory. Nothing here fakes the server.
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");

let built;

/** conveyorBinary returns the path of a conveyor binary built from this checkout. */
export function conveyorBinary() {
  if (process.env.CONVEYOR_BIN) return process.env.CONVEYOR_BIN;
  if (!built) {
    const dir = mkdtempSync(join(tmpdir(), "conveyor-ts-bin-"));
    built = join(dir, "conveyor");
    execFileSync("go", ["build", "-o", built, "./cmd/conveyor"], { cwd: repoRoot, stdio: "inherit" });
    process.on("exit", () => rmSync(dir, { recursive: true, force: true }));
  }
  return built;
}

/**
 * startServer starts a server and resolves once it serves, with its URL.
 * args are added to the command line (e.g. ["--token", "t"]); opts.dataDir
 * reuses a data directory (for restarts).
 */
export async function startServer(args = [], opts = {}) {
  const dataDir = opts.dataDir ?? mkdtempSync(join(tmpdir(), "conveyor-ts-data-"));
  const listen = opts.listen ?? "127.0.0.1:0";
  const child = spawn(
    conveyorBinary(),
    ["server", "--listen", listen, "--data-dir", dataDir, "--log-format", "json", ...args],
    { stdio: ["ignore", "ignore", "pipe"] },
  );
  const log = [];
  const url = await new Promise((resolveURL, reject) => {
    const lines = createInterface({ input: child.stderr });
    lines.on("line", (line) => {
      log.push(line);
      if (log.length > 500) log.shift();
      let rec;
      try {
        rec = JSON.parse(line);
      } catch {
        return;
      }
      if (rec.msg === "conveyor serving") resolveURL(rec.addr);
    });
    child.once("exit", (code, signal) =>
      reject(new Error(`conveyor server exited (${code ?? signal}) before serving:\n${log.join("\n")}`)),
    );
  });
  const exited = new Promise((r) => child.once("exit", r));
  return {
    url,
    dataDir,
    /** listen is the host:port the server bound, for a restart on the same address. */
    listen: new URL(url).host,
    log,
    /** stop sends SIGTERM and waits for the process to exit. */
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      await exited;
    },
    /** kill sends SIGKILL and waits for the process to exit. */
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      await exited;
    },
    /** cleanup stops the server and removes its data directory. */
    async cleanup() {
      await this.stop();
      if (!opts.dataDir) rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
