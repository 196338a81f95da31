/**
 * A rate as the `RateLimit-Policy` field states it: `q` units per `w`
 * seconds. Never the burst.
 */
export interface Quota {
  /** Units per window. */
  readonly q: bigint;
  /** The window, in whole seconds. */
  readonly w: bigint;
}

/** The response header fields of a decision, lower-case names. */
export interface RateLimitHeaders {
  /** `"<name>";q=<q>;w=<w>` per limit (absent when no limit has a rate). */
  "ratelimit-policy"?: string;
  /** `"<name>";r=<remaining>;t=<seconds>`. */
  ratelimit: string;
  /** Whole seconds, rounded up; only on a denial that can be waited off. */
  "retry-after"?: string;
}

/**
 * `count` per `periodMs` in whole seconds: a period of whole seconds is
 * `w`; otherwise `w` is the fewest whole seconds with a whole `q` at that
 * rate (1 per 250 ms is `q=4;w=1`).
 */
export function quotaOf(count: bigint, periodMs: bigint): Quota {
  const gcd = (a: bigint, b: bigint): bigint => (b === 0n ? a : gcd(b, a % b));
  const w = periodMs % 1000n === 0n ? periodMs / 1000n : periodMs / gcd(periodMs, count * 1000n);
  return { q: (count * 1000n * w) / periodMs, w };
}

/** Whole seconds, rounded up: a client that waits that long is never early. */
export function ceilSeconds(ms: number): number {
  return Math.ceil(ms / 1000);
}

/** What a decision needs to know about its limit to write the headers. */
export interface Described {
  /** The name in the header fields. */
  readonly name: string;
  /** The limit's sustained rate, if it is a rate. */
  readonly quota: Quota | undefined;
}

/** The reply fields of one decision, as the module names them (camelCase). */
export interface DecisionFields {
  /** Whether the request was admitted. */
  readonly allowed: boolean;
  /** The most that can be admitted at once (burst, capacity, window limit). */
  readonly limit: number;
  /** Requests of cost 1 that would be admitted right now, after this one. */
  readonly remaining: number;
  /**
   * The wait until this same request would be admitted, in ms; `null` when
   * admitted, and on a denial when it never can be (its cost is above the
   * limit).
   */
  readonly retryAfterMs: number | null;
  /** Until the key is back to full, in ms (the key's TTL). */
  readonly resetAfterMs: number;
  /** With `partial`: the units granted (0 when denied). */
  readonly granted?: number | undefined;
  /** `RL.ACQUIRE` (and `CONCURRENCY`): the lease, `null` when denied or a dry run. */
  readonly lease?: string | null | undefined;
  /** A `SHADOW` named policy: whether enforcing it would have denied. */
  readonly shadowDenied?: boolean | undefined;
  /**
   * Set when the server gave no answer and the limiter's fallback decided:
   * `"timeout"` (the deadline passed) or `"unavailable"` (the connection
   * was known down, nothing was sent).
   */
  readonly fallback?: "timeout" | "unavailable" | undefined;
  /** `true` when the limiter's deny cache answered, without a round trip. */
  readonly cached?: boolean | undefined;
  /** `true` when a `LeasedLimit` answered from its block (or between blocks), without a round trip. */
  readonly leased?: boolean | undefined;
}

/** A reservation's answer (`RESERVE maxDelay`): the decision, and when it starts. */
export interface Reservation {
  /** Admitted (charged now), or denied as without `RESERVE` (nothing charged). */
  readonly decision: Decision;
  /** Admitted: the ms after which the admission starts (0: at once; rounded up, never early). `null` when denied. */
  readonly delayMs: number | null;
}

/** One limit's decision, parsed the same from RESP2 and RESP3 replies. */
export class Decision implements DecisionFields {
  /** Whether the request was admitted. */
  readonly allowed: boolean;
  /** The most that can be admitted at once (burst, capacity, window limit). */
  readonly limit: number;
  /** Requests of cost 1 that would be admitted right now, after this one. */
  readonly remaining: number;
  /** The wait until this request would be admitted, in ms; `null` when admitted or never. */
  readonly retryAfterMs: number | null;
  /** Until the key is back to full, in ms (the key's TTL). */
  readonly resetAfterMs: number;
  // Present only when the reply has them (declared, so not set to undefined).
  /** With `partial`: the units granted (0 when denied). */
  declare readonly granted?: number | undefined;
  /** A concurrency limit's lease, `null` when denied or a dry run. */
  declare readonly lease?: string | null | undefined;
  /** A `SHADOW` named policy: whether enforcing it would have denied. */
  declare readonly shadowDenied?: boolean | undefined;
  /** Set when the limiter's fallback decided: `"timeout"` or `"unavailable"`. */
  declare readonly fallback?: "timeout" | "unavailable" | undefined;
  /** `true` when the limiter's deny cache answered, without a round trip. */
  declare readonly cached?: boolean | undefined;
  /** `true` when a leased limit answered locally, without a round trip. */
  declare readonly leased?: boolean | undefined;
  /** The limit's name and rate, for {@link Decision.headers}. */
  readonly described: Described;

  /** A decision of `fields` about the limit `described`. */
  constructor(fields: DecisionFields, described: Described) {
    this.allowed = fields.allowed;
    this.limit = fields.limit;
    this.remaining = fields.remaining;
    this.retryAfterMs = fields.retryAfterMs;
    this.resetAfterMs = fields.resetAfterMs;
    if (fields.granted !== undefined) this.granted = fields.granted;
    if (fields.lease !== undefined) this.lease = fields.lease;
    if (fields.shadowDenied !== undefined) this.shadowDenied = fields.shadowDenied;
    if (fields.fallback !== undefined) this.fallback = fields.fallback;
    if (fields.cached !== undefined) this.cached = fields.cached;
    if (fields.leased !== undefined) this.leased = fields.leased;
    this.described = described;
  }

  /** For `JSON.stringify`: the quota's integers as numbers when exact, else as strings. */
  toJSON(): object {
    const quota = this.described.quota;
    const num = (v: bigint): number | string => (v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : String(v));
    const { allowed, limit, remaining, retryAfterMs, resetAfterMs, granted, lease, shadowDenied, fallback, cached } = this;
    const described = { name: this.described.name, quota: quota === undefined ? undefined : { q: num(quota.q), w: num(quota.w) } };
    return { allowed, limit, remaining, retryAfterMs, resetAfterMs, granted, lease, shadowDenied, fallback, cached, described };
  }

  /**
   * The header fields of the README's client contract (IETF
   * draft-ietf-httpapi-ratelimit-headers-11): `RateLimit-Policy` with the
   * limit's rate, `RateLimit` with what is left and when, and on a denial
   * that can be waited off `Retry-After` in whole seconds, rounded up.
   *
   * @param name - the policy's name in the fields (default: the one given
   *   when deciding, else `"default"`).
   */
  headers(name: string = this.described.name): RateLimitHeaders {
    return headersOf(this.allowed, this.retryAfterMs, [this], [{ ...this.described, name }]);
  }
}

/** `RateLimit`'s item for one limit: `t` is the wait when nothing is left, else the reset, at most `w`. */
function item(d: Decision, described: Described): string {
  const waiting = d.remaining === 0 && d.retryAfterMs !== null && d.retryAfterMs > 0;
  let t = ceilSeconds(waiting ? d.retryAfterMs : d.resetAfterMs);
  if (described.quota !== undefined && BigInt(t) > described.quota.w) t = Number(described.quota.w);
  return `"${described.name}";r=${d.remaining};t=${t}`;
}

/**
 * The header fields for decisions of several limits taken together. On a
 * denial `RateLimit` names only the limit with the longest wait, its `t`
 * equal to `Retry-After`: `Retry-After` should not point before the end of
 * any listed window.
 */
export function headersOf(
  allowed: boolean,
  retryAfterMs: number | null,
  limits: readonly Decision[],
  described: readonly Described[],
): RateLimitHeaders {
  const policies = described
    .filter((d) => d.quota !== undefined)
    .map((d) => `"${d.name}";q=${d.quota?.q};w=${d.quota?.w}`);
  const fields: RateLimitHeaders = { ratelimit: "" };
  if (policies.length > 0) fields["ratelimit-policy"] = policies.join(", ");
  let deciding = -1;
  limits.forEach((d, i) => {
    const longest = deciding < 0 ? -1 : (limits[deciding]?.retryAfterMs ?? -1);
    if (!d.allowed && d.retryAfterMs !== null && d.retryAfterMs > longest) deciding = i;
  });
  const denied = limits[deciding];
  if (!allowed && retryAfterMs !== null && denied !== undefined) {
    const wait = ceilSeconds(Math.max(retryAfterMs, denied.retryAfterMs ?? 0));
    fields.ratelimit = `"${described[deciding]?.name ?? ""}";r=${denied.remaining};t=${wait}`;
    fields["retry-after"] = String(wait);
    return fields;
  }
  fields.ratelimit = limits
    .map((d, i) => item(d, described[i] ?? { name: "default", quota: undefined }))
    .join(", ");
  return fields;
}

/** Several limits decided at once (`RL.ALL`, `RL.SHARE`, `RL.SHARE.PEEK`). */
export class AllDecision {
  /** Whether every limit admitted. */
  readonly allowed: boolean;
  /** The 0-based index of the limit that decides a denial; `null` when admitted. */
  readonly blockedBy: number | null;
  /** The wait until every limit would admit; `null` when admitted or when some limit never can. */
  readonly retryAfterMs: number | null;
  /** Each limit's decision, in the call's order (on a denial: each one's dry run). */
  readonly limits: readonly Decision[];

  /** The decision of `limits` taken together. */
  constructor(allowed: boolean, blockedBy: number | null, retryAfterMs: number | null, limits: readonly Decision[]) {
    this.allowed = allowed;
    this.blockedBy = blockedBy;
    this.retryAfterMs = retryAfterMs;
    this.limits = limits;
  }

  /**
   * The header fields of the README's client contract for all the limits:
   * every rate in `RateLimit-Policy`; in `RateLimit` every limit, or on a
   * denial the one with the longest wait.
   *
   * @param names - each limit's name (default: those given when deciding).
   */
  headers(names?: readonly string[]): RateLimitHeaders {
    const described = this.limits.map((d, i) => ({ ...d.described, name: names?.[i] ?? d.described.name }));
    return headersOf(this.allowed, this.retryAfterMs, this.limits, described);
  }
}
