/** DEFAULT_RECONNECT_BASE_MS is the ceiling of the first reconnect delay (protocol §5.9). */
export const DEFAULT_RECONNECT_BASE_MS = 500;
/** DEFAULT_RECONNECT_MAX_MS caps every reconnect delay (protocol §5.9). */
export const DEFAULT_RECONNECT_MAX_MS = 30_000;

/**
 * reconnectDelay is the wait before reconnect attempt n (0-based), in
 * milliseconds: uniform in [0, min(max, base*2^n)). Full jitter spreads a
 * fleet of workers that lost the same server over the whole window, so a
 * restarted server is not hit by all of them at once. The caller resets n
 * to 0 on each Welcome, so a flapping connection does not ratchet the delay
 * up to the ceiling.
 */
export function reconnectDelay(
  n: number,
  baseMs = DEFAULT_RECONNECT_BASE_MS,
  maxMs = DEFAULT_RECONNECT_MAX_MS,
): number {
  if (baseMs <= 0 || maxMs <= 0) return 0;
  const exp = Math.max(0, Math.min(n, 60));
  const ceiling = Math.min(maxMs, baseMs * 2 ** exp);
  return Math.random() * ceiling;
}
