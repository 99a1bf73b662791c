// The bearer token the dashboard sends. It lives in sessionStorage only: it
// is gone when the browser session ends, and it is never written to
// localStorage, a cookie or a URL.
import { store } from "./store";

const KEY = "conveyor.token";

/** AuthState is what the app shows: the dashboard, the login prompt, or a wait. */
export type AuthState =
  | { status: "checking" }
  | { status: "ready"; withToken: boolean }
  | { status: "login"; message?: string }
  | { status: "unreachable"; message: string };

/** authState drives the top of the app (see App). */
export const authState = store<AuthState>({ status: "checking" });

function read(): string {
  try {
    return sessionStorage.getItem(KEY) ?? "";
  } catch {
    return "";
  }
}

let token = read();

/** currentToken is the token to send, or "" for none. */
export function currentToken(): string {
  return token;
}

/** saveToken keeps t for this browser session. */
export function saveToken(t: string): void {
  token = t;
  try {
    if (t) sessionStorage.setItem(KEY, t);
    else sessionStorage.removeItem(KEY);
  } catch {
    // Storage may be disabled; the token then lasts as long as the page.
  }
}

/** tokenRefused drops the token and asks for another, saying why. */
export function tokenRefused(message: string): void {
  const had = token !== "";
  saveToken("");
  const s = authState.get();
  if (s.status === "login") return;
  authState.set({
    status: "login",
    message: had ? `The server refused the saved token: ${message}` : undefined,
  });
}

/** signOut forgets the token. */
export function signOut(): void {
  saveToken("");
  authState.set({ status: "login", message: "Signed out. The token was removed from this browser session." });
}
