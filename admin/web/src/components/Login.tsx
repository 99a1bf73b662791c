import { useEffect, useRef, useState } from "preact/hooks";
import { tryToken } from "../lib/api";

/**
 * Login asks for the server's token. It is checked against the server
 * before it is kept (in sessionStorage: gone when the browser session
 * ends), and a wrong one is said to be wrong.
 */
export function Login({ message }: { message?: string }) {
  const [token, setToken] = useState("");
  const [error, setError] = useState("");
  const [busy, setBusy] = useState(false);
  const input = useRef<HTMLInputElement>(null);
  useEffect(() => input.current?.focus(), []);
  useEffect(() => {
    document.title = "Sign in · Conveyor";
  }, []);
  const submit = async (e: Event) => {
    e.preventDefault();
    const t = token.trim();
    if (!t) {
      setError("Enter the token the server was started with (--token or CONVEYOR_TOKEN).");
      return;
    }
    setBusy(true);
    setError("");
    const err = await tryToken(t);
    setBusy(false);
    if (err) {
      setError(err);
      input.current?.select();
    }
  };
  return (
    <main class="login" id="main">
      <form onSubmit={submit} aria-describedby="login-help" noValidate>
        <h1>Conveyor</h1>
        <p id="login-help">This server needs a token. It is kept for this browser session only.</p>
        {message && (
          <p class="notice" role="status">
            {message}
          </p>
        )}
        <label for="token">Token</label>
        <input
          ref={input}
          id="token"
          name="token"
          type="password"
          autoComplete="current-password"
          value={token}
          onInput={(e) => setToken(e.currentTarget.value)}
          aria-invalid={error ? "true" : undefined}
          aria-errormessage={error ? "login-error" : undefined}
        />
        {error && (
          <p id="login-error" class="error" role="alert">
            {error}
          </p>
        )}
        <button type="submit" class="primary" disabled={busy}>
          {busy ? "Checking…" : "Sign in"}
        </button>
      </form>
    </main>
  );
}
