import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import type { ConnectError } from "@connectrpc/connect";
import { asError, isAbort } from "./api";

/** Loaded is what usePoll returns: the latest data and error, and a way to reload. */
export interface Loaded<T> {
  data: T | undefined;
  error: ConnectError | undefined;
  loading: boolean;
  reload: () => void;
}

/**
 * usePoll calls load now and then every interval ms (null: once; a
 * function picks the period from the latest data), never two calls at
 * once (a reload asked for during a call runs right after it), and not
 * while the page is hidden. The data of a previous call stays
 * shown while the next one runs; it is cleared when deps change.
 */
export function usePoll<T>(
  load: (signal: AbortSignal) => Promise<T>,
  interval: number | null | ((data: T) => number | null),
  deps: unknown[],
): Loaded<T> {
  const [state, setState] = useState<{ data?: T; error?: ConnectError; loading: boolean; deps?: unknown[] }>({
    loading: true,
  });
  const kick = useRef<() => void>(() => {});
  useEffect(() => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let ctrl: AbortController | undefined;
    let running = false;
    // again is set by a call made while one runs (a reload after an
    // action): that one's answer may predate the action, so another
    // follows it at once.
    let again = false;
    // Until the first answer, a period picked from the data is 5 s.
    let period = typeof interval === "function" ? 5000 : interval;
    setState({ loading: true, deps });
    const run = async () => {
      if (stopped) return;
      if (running) {
        again = true;
        return;
      }
      clearTimeout(timer);
      running = true;
      again = false;
      ctrl = new AbortController();
      try {
        const data = await load(ctrl.signal);
        if (typeof interval === "function") period = interval(data);
        if (!stopped) setState({ data, loading: false, deps });
      } catch (err) {
        if (!stopped && !isAbort(err)) {
          setState((s) => ({ data: s.data, error: asError(err), loading: false, deps }));
        }
      } finally {
        running = false;
      }
      if (again) {
        void run();
      } else if (!stopped && period !== null && !document.hidden) {
        timer = setTimeout(run, period);
      }
    };
    const onVisible = () => {
      if (!document.hidden && period !== null) void run();
    };
    kick.current = () => void run();
    document.addEventListener("visibilitychange", onVisible);
    void run();
    return () => {
      stopped = true;
      clearTimeout(timer);
      ctrl?.abort();
      document.removeEventListener("visibilitychange", onVisible);
    };
  }, deps);
  const reload = useCallback(() => kick.current(), []);
  // Until the effect has run for new deps, the state is the old deps':
  // show none of it rather than the previous page's data for a frame.
  if (!sameDeps(state.deps, deps)) return { data: undefined, error: undefined, loading: true, reload };
  return { data: state.data, error: state.error, loading: state.loading, reload };
}

function sameDeps(a: unknown[] | undefined, b: unknown[]): boolean {
  return a !== undefined && a.length === b.length && a.every((v, i) => Object.is(v, b[i]));
}

const tickers = new Map<number, { now: number; subs: Set<() => void>; timer?: ReturnType<typeof setInterval> }>();

/**
 * useNow re-renders every everyMs (one shared timer per period) and returns
 * the current time in ms, for relative times that stay true.
 */
export function useNow(everyMs = 1000): number {
  const [, setTick] = useState(0);
  useEffect(() => {
    let t = tickers.get(everyMs);
    if (!t) {
      t = { now: Date.now(), subs: new Set() };
      tickers.set(everyMs, t);
    }
    const ticker = t;
    const sub = () => setTick((n) => n + 1);
    ticker.subs.add(sub);
    if (!ticker.timer) {
      ticker.timer = setInterval(() => {
        ticker.now = Date.now();
        for (const s of ticker.subs) s();
      }, everyMs);
    }
    return () => {
      ticker.subs.delete(sub);
      if (ticker.subs.size === 0) {
        clearInterval(ticker.timer);
        ticker.timer = undefined;
      }
    };
  }, [everyMs]);
  return Date.now();
}
