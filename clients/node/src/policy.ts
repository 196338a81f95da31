import { type Quota, quotaOf } from "./decision.js";
import { type Duration, durationArg, durationMillis } from "./duration.js";

/** A count: 1 to 9223372036854775807 (a `bigint` past 2^53). */
export type Count = number | bigint;

/** `GCRA limit period [BURST n]`: a sustained `limit` per `period`, bursts of `burst` (default `limit`). */
export interface GcraPolicy {
  /** The discriminant. */
  readonly type: "gcra";
  /** Requests per `period`. */
  readonly limit: Count;
  /** The period of the rate. */
  readonly period: Duration;
  /** The most admitted at once (default: `limit`). */
  readonly burst?: Count;
}

/** `BUCKET capacity refill period`: a token bucket refilled continuously. */
export interface BucketPolicy {
  /** The discriminant. */
  readonly type: "bucket";
  /** Tokens the bucket holds (it starts full). */
  readonly capacity: Count;
  /** Tokens added per `period`. */
  readonly refill: Count;
  /** The refill period. */
  readonly period: Duration;
}

/** `SLIDING limit window [EXACT | APPROX | BUCKETS n]`. */
export interface SlidingPolicy {
  /** The discriminant. */
  readonly type: "sliding";
  /** Requests per `window`. */
  readonly limit: Count;
  /** The window's length. */
  readonly window: Duration;
  /** `"exact"` (the default: a log), `"approx"` (two windows), or `{ buckets: n }` sub-windows. */
  readonly mode?: "exact" | "approx" | { readonly buckets: number };
}

/** `FIXED limit window [ALIGNED]`: a count per window. */
export interface FixedPolicy {
  /** The discriminant. */
  readonly type: "fixed";
  /** Requests per window. */
  readonly limit: Count;
  /** The window's length. */
  readonly window: Duration;
  /** Windows at multiples of `window` since the epoch, not from the first request. */
  readonly aligned?: boolean;
}

/** `CONCURRENCY limit ttl`: leases held at once (`RL.ACQUIRE`). */
export interface ConcurrencyPolicy {
  /** The discriminant. */
  readonly type: "concurrency";
  /** Units held at once. */
  readonly limit: Count;
  /** The longest a lease lives without renewal. */
  readonly ttl: Duration;
}

/** `POLICY name`: a named policy (the module loaded with `policies on`). */
export interface NamedPolicy {
  /** The discriminant. */
  readonly type: "policy";
  /** The policy's name, as `RL.POLICY SET` defined it. */
  readonly name: string;
}

/** A limit, as `RL.ALL`, `RL.PEEK` and `RL.POLICY SET` take it. */
export type Policy = GcraPolicy | BucketPolicy | SlidingPolicy | FixedPolicy | ConcurrencyPolicy | NamedPolicy;

/** The words of `policy` after its key, without its keyword (as its own command takes them). */
export function policyArgs(policy: Policy): string[] {
  switch (policy.type) {
    case "gcra":
      return [String(policy.limit), durationArg(policy.period), ...(policy.burst === undefined ? [] : ["BURST", String(policy.burst)])];
    case "bucket":
      return [String(policy.capacity), String(policy.refill), durationArg(policy.period)];
    case "sliding": {
      const mode = policy.mode;
      const words = [String(policy.limit), durationArg(policy.window)];
      if (mode === "exact") words.push("EXACT");
      else if (mode === "approx") words.push("APPROX");
      else if (mode !== undefined) words.push("BUCKETS", String(mode.buckets));
      return words;
    }
    case "fixed":
      return [String(policy.limit), durationArg(policy.window), ...(policy.aligned === true ? ["ALIGNED"] : [])];
    case "concurrency":
      return [String(policy.limit), durationArg(policy.ttl)];
    case "policy":
      return [policy.name];
  }
}

/** `policy` as `RL.ALL` and `RL.PEEK` take it: its keyword, then its words. */
export function policyWords(policy: Policy): string[] {
  return [policy.type === "policy" ? "POLICY" : policy.type.toUpperCase(), ...policyArgs(policy)];
}

/** The policy's sustained rate for `RateLimit-Policy` (never the burst); none for a concurrency or named policy. */
export function policyQuota(policy: Policy): Quota | undefined {
  let count: Count;
  let period: Duration;
  switch (policy.type) {
    case "gcra":
      [count, period] = [policy.limit, policy.period];
      break;
    case "bucket":
      [count, period] = [policy.refill, policy.period];
      break;
    case "sliding":
    case "fixed":
      [count, period] = [policy.limit, policy.window];
      break;
    default:
      return undefined;
  }
  return rateQuota(count, period);
}

/** `count` per `period` as a {@link Quota}, or `undefined` if either is not valid. */
export function rateQuota(count: Count, period: Duration): Quota | undefined {
  const ms = durationMillis(period);
  const n = typeof count === "bigint" ? count : Number.isSafeInteger(count) ? BigInt(count) : undefined;
  return ms === undefined || n === undefined || n <= 0n ? undefined : quotaOf(n, ms);
}
