// A small router over the history API. Every page is a real path under the
// base the server mounts the dashboard at (/ui/), so a task or a filtered
// list is a URL to share; the server answers unknown paths with index.html.
import { store, useStore } from "./store";

/** BASE is where the dashboard is served, with a trailing slash. */
export const BASE: string = import.meta.env.BASE_URL;

/** Location is the current page: a path inside BASE ("/", "/tasks/ID") and its query. */
export interface Location {
  path: string;
  query: URLSearchParams;
}

function read(): Location {
  let p = location.pathname;
  p = p.startsWith(BASE) ? p.slice(BASE.length) : p.replace(/^\/+/, "");
  return { path: "/" + p.replace(/\/+$/, ""), query: new URLSearchParams(location.search) };
}

const current = store<Location>(read());

addEventListener("popstate", () => current.set(read()));

/** useLocation re-renders on navigation and returns the current page. */
export function useLocation(): Location {
  return useStore(current);
}

/**
 * href is the URL of a dashboard page: to is a path inside BASE, with an
 * optional query ("/tasks?queue=default").
 */
export function href(to: string): string {
  return BASE + to.replace(/^\/+/, "");
}

/** navigate goes to a dashboard page, adding to the history unless replace. */
export function navigate(to: string, replace = false): void {
  const url = href(to);
  if (url === location.pathname + location.search) return;
  if (replace) history.replaceState(null, "", url);
  else history.pushState(null, "", url);
  current.set(read());
  if (!replace) scrollTo(0, 0);
}

/** withQuery is path with the query params set (empty values are left out). */
export function withQuery(path: string, params: Record<string, string | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v) q.set(k, v);
  }
  const s = q.toString();
  return s ? `${path}?${s}` : path;
}

/** seg encodes one path segment (queue names may hold dots and dashes). */
export function seg(s: string): string {
  return encodeURIComponent(s);
}
