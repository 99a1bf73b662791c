/**
 * MAX_REPLAY_IDS bounds the webhook-ids a push handler remembers (about
 * 150 bytes each, so some 15 MB at most). It takes a sustained 330
 * requests a second to fill it within the default ±5 minute window.
 */
export const MAX_REPLAY_IDS = 100_000;

/** Admission is what ReplayGuard.admit makes of a signed request. */
export type Admission = "new" | "replay" | "forgotten";

/**
 * ReplayGuard remembers the webhook-ids of accepted signed requests for
 * as long as their timestamps would be accepted (timestamp + the
 * tolerance), so that a captured request sent again within that window is
 * refused. Ids are kept in arrival order and expired ones are swept from
 * the oldest on each admission, with no timer. When MAX_REPLAY_IDS are
 * held, the oldest is forgotten to make room, and from then on a request
 * whose timestamp is not later than the forgotten one's is refused too
 * ("forgotten"): a repeat of it could no longer be told from a first
 * arrival. Memory is bounded; replay protection is not weakened.
 */
export class ReplayGuard {
  /** seen maps each id to when it may be forgotten (ms since the epoch). */
  private readonly seen = new Map<string, number>();
  /** floor is the latest timestamp (ms) of an id forgotten for room; none at or before it is admitted. */
  private floor = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly toleranceMs: number,
    private readonly max = MAX_REPLAY_IDS,
  ) {}

  /** admit records id, signed at timestampMs, unless it was seen or may have been. */
  admit(id: string, timestampMs: number, now: number): Admission {
    this.sweep(now);
    if (this.seen.has(id)) return "replay";
    if (timestampMs <= this.floor) return "forgotten";
    while (this.seen.size >= this.max) {
      const oldest = this.seen.entries().next();
      if (oldest.done) break;
      const [oldId, until] = oldest.value;
      this.seen.delete(oldId);
      this.floor = Math.max(this.floor, until - this.toleranceMs);
    }
    this.seen.set(id, timestampMs + this.toleranceMs);
    return "new";
  }

  /** size is how many ids are remembered. */
  get size(): number {
    return this.seen.size;
  }

  /**
   * sweep forgets expired ids from the oldest arrival on, stopping at the
   * first one still live: arrivals are nearly in timestamp order, so what
   * it leaves behind expires within one more window.
   */
  private sweep(now: number): void {
    for (const [id, until] of this.seen) {
      if (until >= now) break;
      this.seen.delete(id);
    }
  }
}
