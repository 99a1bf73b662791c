import type { ComponentChildren } from "preact";
import { href, navigate } from "../lib/router";

interface Props {
  to: string;
  children: ComponentChildren;
  class?: string;
  rel?: string;
  title?: string;
  "aria-label"?: string;
  "aria-current"?: "page";
  [data: `data-${string}`]: string | undefined;
}

/**
 * Link is an anchor to a dashboard page: a real URL (open it in a new tab,
 * copy it), followed in the page without reloading on a plain click.
 */
export function Link({ to, children, ...rest }: Props) {
  const onClick = (e: MouseEvent) => {
    if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    e.preventDefault();
    navigate(to);
  };
  return (
    <a {...rest} href={href(to)} onClick={onClick}>
      {children}
    </a>
  );
}
