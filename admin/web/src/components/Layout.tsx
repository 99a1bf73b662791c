import type { ComponentChildren } from "preact";
import { useEffect, useRef } from "preact/hooks";
import { signOut } from "../lib/auth";
import { useLocation } from "../lib/router";
import { Link } from "./Link";
import { TaskSearch } from "./TaskSearch";

const NAV: { to: string; label: string; match: (p: string) => boolean }[] = [
  { to: "/", label: "Queues", match: (p) => p === "/" || p.startsWith("/queues") },
  { to: "/tasks", label: "Tasks", match: (p) => p.startsWith("/tasks") },
  { to: "/across", label: "Across queues", match: (p) => p.startsWith("/across") },
  { to: "/groups", label: "Groups", match: (p) => p.startsWith("/groups") },
  { to: "/crons", label: "Cron", match: (p) => p.startsWith("/crons") },
  { to: "/workers", label: "Workers", match: (p) => p.startsWith("/workers") },
];

/**
 * Layout is the frame of every page: a skip link, the header with the
 * navigation, and the main region. On navigation the focus moves to the
 * new page's heading, as a screen reader user expects after a page load.
 */
export function Layout({ children, withToken, version }: { children: ComponentChildren; withToken: boolean; version?: string }) {
  const { path } = useLocation();
  const main = useRef<HTMLElement>(null);
  const first = useRef(true);
  useEffect(() => {
    if (first.current) {
      first.current = false;
      return;
    }
    const h = main.current?.querySelector("h1");
    if (h) {
      h.setAttribute("tabindex", "-1");
      h.focus({ preventScroll: true });
    }
  }, [path]);
  return (
    <>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="top">
        <Link to="/" class="brand" aria-label="Conveyor, queues overview">
          <span aria-hidden="true">▤</span> Conveyor
        </Link>
        <nav aria-label="Main">
          <ul>
            {NAV.map((n) => (
              <li key={n.to}>
                <Link to={n.to} aria-current={n.match(path) ? "page" : undefined}>
                  {n.label}
                </Link>
              </li>
            ))}
          </ul>
        </nav>
        <TaskSearch />
        <div class="top-end">
          {version && <span class="muted version">{/^\d/.test(version) ? `v${version}` : version}</span>}
          {withToken && (
            <button type="button" class="link" onClick={signOut}>
              Sign out
            </button>
          )}
        </div>
      </header>
      <main id="main" ref={main}>
        {children}
      </main>
    </>
  );
}
