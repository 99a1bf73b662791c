import { useEffect, useState } from "preact/hooks";

/** Store holds one value and tells its subscribers when it changes. */
export interface Store<T> {
  get(): T;
  set(value: T): void;
  subscribe(listener: () => void): () => void;
}

/** store makes a Store holding initial. */
export function store<T>(initial: T): Store<T> {
  let value = initial;
  const listeners = new Set<() => void>();
  return {
    get: () => value,
    set(next: T) {
      value = next;
      for (const l of [...listeners]) l();
    },
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
}

/** useStore re-renders the component whenever s changes and returns its value. */
export function useStore<T>(s: Store<T>): T {
  const [, setTick] = useState(0);
  useEffect(() => s.subscribe(() => setTick((n) => n + 1)), [s]);
  return s.get();
}
