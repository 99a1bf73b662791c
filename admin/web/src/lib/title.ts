import { useEffect } from "preact/hooks";

/** useTitle sets the document's title for the page shown. */
export function useTitle(title: string): void {
  useEffect(() => {
    document.title = `${title} · Conveyor`;
  }, [title]);
}
