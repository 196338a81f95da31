import { Decision } from "./decision.js";

/** How long an entry outlives its denial, waiting for an admission to move it on (ms). */
const GRACE_MS = 1000;

interface Entry {
  /** `performance.now()` until which a request costing at least `cost` is denied here. */
  until: number;
  /** Paced limits: the ms one unit takes; `undefined` for windows. */
  readonly interval: number | undefined;
  readonly cost: number;
  readonly decision: Decision;
}

/**
 * Denials remembered locally (the Rust client's deny cache): after the
 * server denies a request with `retryAfterMs` r, a request on the same key
 * and limit costing at least as much is denied without a round trip until
 * r has passed. It only ever denies, and only what the server denied for
 * that long, so it never admits anything the server would not; it can deny
 * a little longer than the server would (the wait counts from the reply's
 * arrival), and a refund or `DEL` meanwhile is not seen.
 *
 * **Paced limits** (GCRA, token bucket) regain one unit every `interval`:
 * after n units admitted by this process since the denial the key holds
 * at most what accrued minus n, so a request before r + n × interval is
 * denied here too, and a key offered more than its limit costs about one
 * command per admission.
 *
 * At most `capacity` entries; when full the least recently used gives way.
 */
export class DenyCache {
  private readonly entries = new Map<string, Entry>();

  constructor(readonly capacity: number) {
    if (!Number.isSafeInteger(capacity) || capacity < 1) throw new RangeError(`deny cache capacity must be a positive integer, got ${capacity}`);
  }

  /** The local denial for a request of `cost` on `slot`, or `undefined`: ask the server. */
  check(slot: string, cost: number): Decision | undefined {
    const entry = this.entries.get(slot);
    if (entry === undefined) return undefined;
    const now = performance.now();
    if (now >= entry.until + Math.max(GRACE_MS, entry.interval ?? 0)) {
      this.entries.delete(slot);
      return undefined;
    }
    if (now >= entry.until || cost < entry.cost) return undefined;
    // Most recently used last.
    this.entries.delete(slot);
    this.entries.set(slot, entry);
    const d = entry.decision;
    return new Decision({ allowed: false, limit: d.limit, remaining: 0, retryAfterMs: Math.ceil(entry.until - now), resetAfterMs: d.resetAfterMs, cached: true }, d.described);
  }

  /** Whether `slot` was denied lately (its entry is still of use): its requests go to the server one at a time. */
  recent(slot: string): boolean {
    const entry = this.entries.get(slot);
    return entry !== undefined && performance.now() < entry.until + Math.max(GRACE_MS, entry.interval ?? 0);
  }

  /** What the server answered for a request of `cost` on `slot`; `interval` for paced limits. */
  observe(slot: string, cost: number, d: Decision, interval: number | undefined): void {
    if (!d.allowed) {
      const now = performance.now();
      if (d.retryAfterMs === null || d.retryAfterMs <= 0 || d.fallback !== undefined) return;
      const until = Math.max(now + d.retryAfterMs, this.entries.get(slot)?.until ?? 0);
      this.entries.delete(slot);
      this.entries.set(slot, { until, interval, cost, decision: d });
      if (this.entries.size > this.capacity) {
        const oldest = this.entries.keys().next().value;
        if (oldest !== undefined) this.entries.delete(oldest);
      }
      return;
    }
    const entry = this.entries.get(slot);
    if (entry?.interval === undefined || d.fallback !== undefined) return;
    // n units admitted since the denial: the key holds at most what accrued by `until` + n × interval, minus n.
    entry.until += cost * entry.interval;
  }

  /** Entries held. */
  get size(): number {
    return this.entries.size;
  }
}
