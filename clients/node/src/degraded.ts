import { Decision } from "./decision.js";
import { durationMillis } from "./duration.js";
import type { BucketPolicy, FixedPolicy, GcraPolicy, SlidingPolicy } from "./policy.js";

/** The shortest time over which shares are weighed (ms): `max(window, 10 s)`. */
const MIN_HORIZON_MS = 10_000;

interface Share {
  /** The units left at the last reply, fractional. */
  level: number;
  /** `performance.now()` of the last reply. */
  at: number;
  /** What everyone consumed on the key, decayed. */
  total: number;
  /** What this process was charged, decayed. */
  own: number;
  limit: number;
  /** Units per ms. */
  readonly rate: number;
  /** The decay's time constant (ms). */
  readonly horizon: number;
  /** While the server is unreachable: this process's local bucket. */
  local: { tokens: number; at: number } | undefined;
}

/** The sustained rate (units per ms) and window (ms) of `policy`, or `undefined`. */
function rateOf(policy: GcraPolicy | BucketPolicy | SlidingPolicy | FixedPolicy): { rate: number; window: number } | undefined {
  const span = Number(durationMillis(policy.type === "gcra" || policy.type === "bucket" ? policy.period : policy.window) ?? 0n);
  const units = Number(policy.type === "bucket" ? policy.refill : policy.limit);
  if (!(span > 0) || !(units > 0)) return undefined;
  return { rate: units / span, window: span };
}

/**
 * Degraded mode (the Rust client's): while the server is unreachable, a
 * fail-closed limit is enforced in this process at its limit and rate times
 * this process's share of the key's recent traffic, estimated from the
 * server's replies. Each reply on a key updates, decayed by
 * `exp(−elapsed / max(window, 10 s))`:
 *
 * - `level`, the units left: `remaining`, plus the fraction that
 *   `resetAfterMs × rate` short of the limit tells (exact for GCRA and
 *   buckets; for windows within `[remaining, remaining + 1]`);
 * - `total += min(limit, level_before + rate × elapsed) − level`: what
 *   everyone consumed since the previous reply;
 * - `own += charged`: what this request took (its cost if admitted).
 *
 * The share is `own / max(total, own)`. Unreachable, a key gets a token
 * bucket of `limit × share`, filling at `rate × share`, from `level × share`
 * at its last reply; a key never answered has no share and is denied. The
 * next reply from the server drops the local bucket. At most `capacity`
 * keys, least recently answered out.
 */
export class DegradedShares {
  private readonly shares = new Map<string, Share>();

  constructor(readonly capacity: number) {
    if (!Number.isSafeInteger(capacity) || capacity < 1) throw new RangeError(`degraded capacity must be a positive integer, got ${capacity}`);
  }

  /** A server reply `d` to a request of `cost` on `slot` under `policy`. */
  observe(slot: string, policy: GcraPolicy | BucketPolicy | SlidingPolicy | FixedPolicy, d: Decision, cost: number): void {
    const now = performance.now();
    let s = this.shares.get(slot);
    const limit = d.limit;
    const rated = rateOf(policy);
    if (rated === undefined || !(limit > 0)) return;
    const { rate } = rated;
    const fraction = Math.min(limit, Math.max(d.remaining, limit - d.resetAfterMs * rate));
    const level = Math.min(d.remaining + 1, fraction);
    const charged = d.allowed ? cost : 0;
    if (s === undefined) {
      s = { level, at: now, total: charged, own: charged, limit, rate, horizon: Math.max(rated.window, MIN_HORIZON_MS), local: undefined };
      if (this.shares.size >= this.capacity) {
        const oldest = this.shares.keys().next().value;
        if (oldest !== undefined) this.shares.delete(oldest);
      }
    } else {
      this.shares.delete(slot);
      const elapsed = Math.max(0, now - s.at);
      const decay = Math.exp(-elapsed / s.horizon);
      const consumed = Math.min(limit, s.level + rate * elapsed) - level;
      s.total = s.total * decay + consumed;
      s.own = s.own * decay + charged;
      s.level = level;
      s.at = now;
      s.limit = limit;
      s.local = undefined;
    }
    this.shares.set(slot, s);
  }

  /** This process's share of `slot` (0 to 1), or `undefined` when the key was never answered. */
  share(slot: string): number | undefined {
    const s = this.shares.get(slot);
    if (s === undefined) return undefined;
    if (!(s.own > 0)) return 0;
    return s.own / Math.max(s.total, s.own);
  }

  /** The local decision on a request of `cost` on `slot`, the server unreachable (`fallback` says how). */
  decide(slot: string, cost: number, fallback: Decision): Decision {
    const s = this.shares.get(slot);
    const share = this.share(slot) ?? 0;
    const deny = (retryAfterMs: number | null): Decision =>
      new Decision({ allowed: false, limit: fallback.limit, remaining: 0, retryAfterMs, resetAfterMs: 0, fallback: fallback.fallback }, fallback.described);
    if (s === undefined || share <= 0) return deny(null);
    const now = performance.now();
    const capacity = s.limit * share;
    const rate = s.rate * share;
    s.local ??= { tokens: Math.min(capacity, s.level * share + rate * (now - s.at)), at: now };
    const local = s.local;
    local.tokens = Math.min(capacity, local.tokens + rate * (now - local.at));
    local.at = now;
    if (cost > capacity) return deny(null);
    if (local.tokens >= cost) {
      local.tokens -= cost;
      return new Decision(
        { allowed: true, limit: fallback.limit, remaining: Math.floor(local.tokens), retryAfterMs: null, resetAfterMs: 0, fallback: fallback.fallback },
        fallback.described,
      );
    }
    return deny(Math.ceil((cost - local.tokens) / rate));
  }
}
