import type { RedisLike } from "./client.js";
import type { Decision } from "./decision.js";
import type { Duration, DurationUnit } from "./duration.js";
import { ReplyError, UnavailableError } from "./errors.js";
import { DEFAULT_TIMEOUT_MS, type Guard } from "./guard.js";
import { RateLimiter } from "./limiter.js";
import { type Policy, policyWords } from "./policy.js";

/** A duration as @upstash/ratelimit writes it: `"10 s"`, `"1m"`, `"250 ms"`, `"1 w"`. */
export type UpstashDuration = `${number} ${DurationUnit | "w"}` | `${number}${DurationUnit | "w"}`;

/** An algorithm, as `Ratelimit.slidingWindow`, `fixedWindow` and `tokenBucket` make it. */
export interface Algorithm {
  /** The module's policy that decides it. */
  readonly policy: Policy;
  /** The most admitted in a window (or the bucket's size): `limit` in the responses. */
  readonly tokens: number;
}

/** The response of {@link Ratelimit.limit} and {@link Ratelimit.blockUntilReady}, as @upstash/ratelimit's. */
export interface RatelimitResponse {
  /** Whether the request may pass. */
  readonly success: boolean;
  /** The most allowed in a window (the bucket's size). */
  readonly limit: number;
  /** What is left now. */
  readonly remaining: number;
  /**
   * Unix time in ms: when a denied request may be retried; when an admitted
   * one's limit is back to full. From the server's relative times at this
   * process's clock.
   */
  readonly reset: number;
  /** Resolved at once: there is no background work (analytics are the server's own counts; no multi-region sync). */
  readonly pending: Promise<unknown>;
  /**
   * Why the answer is not a plain decision: `"timeout"` when Redis did not
   * answer within `timeout`, or the connection was known down (nothing was
   * sent), and the request was let through; `"cacheBlock"` when the
   * ephemeral cache denied it without a round trip; `"denyList"` when the
   * identifier, or a value given with it, is on the server's deny list
   * (`RL.DENY`, with `enableProtection`).
   */
  readonly reason?: "timeout" | "cacheBlock" | "denyList";
  /** With `reason: "denyList"`: the denied value (the identifier, or the `ip`, `userAgent` or `country` given to `limit()`). */
  readonly deniedValue?: string;
}

/** The options of {@link Ratelimit}, those of @upstash/ratelimit's that apply. */
export interface RatelimitConfig {
  /** A node-redis or ioredis client, or a `sendCommand` function (not an @upstash/redis REST client: the module needs a Redis connection). */
  readonly redis: RedisLike;
  /** The algorithm: `Ratelimit.slidingWindow(10, "10 s")`, `fixedWindow(...)` or `tokenBucket(...)`. */
  readonly limiter: Algorithm;
  /** Keys are `<prefix>:<identifier>` (default `"@upstash/ratelimit"`). */
  readonly prefix?: string;
  /**
   * Let the request through when Redis has not answered after this many
   * ms (default 5000, as @upstash/ratelimit), with `reason: "timeout"`;
   * at once while the connection is known down. Every decision has a
   * deadline: 0 (which @upstash/ratelimit reads as "no timeout") is taken
   * as 300 ({@link DEFAULT_TIMEOUT_MS}).
   */
  readonly timeout?: number;
  /** The most `blockUntilReady` calls waiting at once, each on a connection of its own (default 64). */
  readonly maxWaiters?: number;
  /**
   * Denials remembered in this process (on by default, as Upstash's): an
   * identifier denied until T is denied here until T, `reason:
   * "cacheBlock"`, without a round trip. `false` turns it off. A `Map` is
   * accepted for Upstash's signature, but the cache is the package's own,
   * bounded to 10,000 entries (least recently used first out).
   */
  readonly ephemeralCache?: Map<string, number> | false;
  /**
   * Checks the server's deny list (the module loaded with `policies on`):
   * a value `v` is denied by `RL.DENY <prefix>:<v> …`, whether it is the
   * identifier or the `ip`, `userAgent` or `country` given to `limit()`
   * (one list for every kind of value, as Upstash's). A denied request is
   * answered `success: false`, `reason: "denyList"`, `deniedValue`, with
   * nothing charged. The identifier alone costs one `RL.DENIED` after a
   * denial, none otherwise (the server denies such a key itself); with
   * other values, one `RL.DENIED` per value, pipelined with the decision
   * (one round trip), and a `REFUND` of the decision's charge when a value
   * is denied.
   */
  readonly enableProtection?: boolean;
  /**
   * Dynamic limits, over a named policy `<prefix>:dynamic` (the module
   * loaded with `policies on`): {@link Ratelimit.setDynamicLimit} defines it
   * for every process at once, and each `limit()` is `RL.CHECK` under it
   * (one command); while none is set, a second command decides by the
   * algorithm's own limit.
   */
  readonly dynamicLimits?: boolean;
  /**
   * Accepted for @upstash/ratelimit's signature; no analytics are written:
   * the server counts every decision itself (`INFO ratelimit`, and per
   * named policy `RL.POLICY STATS`), see {@link Ratelimit.analytics}.
   */
  readonly analytics?: boolean;
}

/** The options of {@link Ratelimit.limit}. */
export interface LimitOptions {
  /** The units this request takes (default 1). */
  readonly rate?: number;
  /** With `enableProtection`: the client's IP address, checked against the deny list. */
  readonly ip?: string;
  /** With `enableProtection`: the client's user agent, checked against the deny list. */
  readonly userAgent?: string;
  /** With `enableProtection`: the client's country, checked against the deny list. */
  readonly country?: string;
  /** Stops waiting: the call rejects with `signal.reason`, and a command not yet written is never written. */
  readonly signal?: AbortSignal;
}

const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 } as const;

function moduleDuration(duration: UpstashDuration): Duration {
  const match = /^(\d*\.?\d+) ?(ms|s|m|h|d|w)$/.exec(duration);
  if (match === null) throw new TypeError(`invalid duration '${duration}': expected e.g. "10 s", "1.5 s", "1m", "250ms"`);
  const [, n = "0", unit = "s"] = match;
  if (!n.includes(".")) return (unit === "w" ? `${BigInt(n) * 7n}d` : `${n}${unit}`) as Duration;
  // A fraction ("1.5 s", as @upstash/ratelimit takes it) in whole milliseconds.
  const ms = Number(n) * UNIT_MS[unit as keyof typeof UNIT_MS];
  const whole = Math.round(ms);
  if (whole <= 0 || Math.abs(ms - whole) > 1e-6) throw new TypeError(`invalid duration '${duration}': not a whole number of milliseconds`);
  return whole;
}

/**
 * The API of @upstash/ratelimit's `Ratelimit`, on the redis-ratelimit
 * module: each `limit()` is one command, decided on the server's clock,
 * and `blockUntilReady()` is one command that waits on the server
 * (`WAIT`) instead of polling. See the package README for what differs.
 *
 * @example
 * ```ts
 * const ratelimit = new Ratelimit({ redis: client, limiter: Ratelimit.slidingWindow(10, "10 s") });
 * const { success, reset } = await ratelimit.limit(userId);
 * ```
 */
export class Ratelimit {
  private readonly limiter: RateLimiter;
  private readonly algorithm: Algorithm;
  private readonly prefix: string;
  private readonly protection: boolean;
  private readonly dynamic: boolean;

  /** A rate limit over `config.redis`. */
  constructor(config: RatelimitConfig) {
    const timeout = config.timeout === undefined ? 5000 : config.timeout > 0 ? config.timeout : DEFAULT_TIMEOUT_MS;
    const denyCache = config.ephemeralCache === false ? 0 : 10_000;
    this.limiter = new RateLimiter(config.redis, { timeout, fallback: "error", maxWaiters: config.maxWaiters ?? 64, denyCache });
    this.algorithm = config.limiter;
    this.prefix = config.prefix ?? "@upstash/ratelimit";
    this.protection = config.enableProtection === true;
    this.dynamic = config.dynamicLimits === true;
  }

  /** The named policy that holds the dynamic limit. */
  private get dynamicName(): string {
    return `${this.prefix}:dynamic`;
  }

  /**
   * Sets the limit of every process using this prefix at once (a named
   * policy: `RL.POLICY SET`), or `false` to go back to the algorithm's
   * (`RL.POLICY DEL`). Needs `dynamicLimits: true` and `policies on`.
   */
  async setDynamicLimit(options: { readonly limit: number | false }): Promise<void> {
    if (!this.dynamic) throw new Error("dynamicLimits is not enabled");
    if (options.limit === false) {
      await this.limiter.raw(["RL.POLICY", "DEL", this.dynamicName]).catch((error: unknown) => {
        if (!(error instanceof ReplyError && /no policy named/.test(error.message))) throw error;
      });
      return;
    }
    await this.limiter.raw(["RL.POLICY", "SET", this.dynamicName, ...policyWords(this.withLimit(options.limit))]);
  }

  /** The dynamic limit in force, or `null` when none is set. */
  async getDynamicLimit(): Promise<{ dynamicLimit: number | null }> {
    if (!this.dynamic) throw new Error("dynamicLimits is not enabled");
    try {
      const reply = await this.limiter.raw(["RL.POLICY", "GET", this.dynamicName]);
      const text = typeof reply === "string" ? reply : reply instanceof Uint8Array ? Buffer.from(reply).toString("utf8") : "";
      // The canonical form: "SLIDING 10 10s APPROX", "BUCKET 5 1 1s" (the capacity first).
      const words = text.split(/\s+/);
      const n = Number(words[1]);
      return { dynamicLimit: Number.isFinite(n) ? n : null };
    } catch (error) {
      if (error instanceof ReplyError && /no policy named/.test(error.message)) return { dynamicLimit: null };
      throw error;
    }
  }

  /**
   * The server's own counts for this limiter's command (`INFO
   * commandstats` and `INFO ratelimit`): no per-identifier analytics are
   * kept. A raw view, for dashboards.
   */
  async analytics(): Promise<string> {
    const reply = await this.limiter.raw(["INFO", "ratelimit"]);
    return typeof reply === "string" ? reply : reply instanceof Uint8Array ? Buffer.from(reply).toString("utf8") : "";
  }

  /** The algorithm's policy with `limit` in place of its tokens (a bucket's capacity). */
  private withLimit(limit: number): Exclude<Policy, { type: "concurrency" | "policy" }> {
    const policy = this.decisive();
    if (policy.type === "bucket") return { ...policy, capacity: limit };
    return { ...policy, limit };
  }

  /** The deadlines and circuit of every call (`guard.open`: the connection is known down). */
  get guard(): Guard {
    return this.limiter.guard;
  }

  /** Closes the connections `blockUntilReady` opened (the client itself is the caller's). */
  close(): void {
    this.limiter.close();
  }

  /**
   * The two-window estimate (`RL.SLIDING APPROX`): at most `tokens` per
   * `window` by the weighted count of this window and the previous one.
   */
  static slidingWindow(tokens: number, window: UpstashDuration): Algorithm {
    return { tokens, policy: { type: "sliding", limit: tokens, window: moduleDuration(window), mode: "approx" } };
  }

  /** A count per window aligned to the epoch (`RL.FIXED ALIGNED`). */
  static fixedWindow(tokens: number, window: UpstashDuration): Algorithm {
    return { tokens, policy: { type: "fixed", limit: tokens, window: moduleDuration(window), aligned: true } };
  }

  /**
   * @upstash/ratelimit's cached fixed window: here a fixed window
   * (`RL.FIXED ALIGNED`) decided by the server on every request; the
   * ephemeral cache (on by default) answers the denials locally.
   */
  static cachedFixedWindow(tokens: number, window: UpstashDuration): Algorithm {
    return Ratelimit.fixedWindow(tokens, window);
  }

  /**
   * A bucket of `maxTokens`, starting full, refilled with `refillRate`
   * tokens per `interval`, continuously (`RL.BUCKET`).
   */
  static tokenBucket(refillRate: number, interval: UpstashDuration, maxTokens: number): Algorithm {
    return { tokens: maxTokens, policy: { type: "bucket", capacity: maxTokens, refill: refillRate, period: moduleDuration(interval) } };
  }

  private key(identifier: string): string {
    return `${this.prefix}:${identifier}`;
  }

  private response(d: Decision): RatelimitResponse {
    const wait = d.allowed || d.retryAfterMs === null ? d.resetAfterMs : d.retryAfterMs;
    const r = { success: d.allowed, limit: this.algorithm.tokens, remaining: d.remaining, reset: Date.now() + wait, pending: Promise.resolve() };
    return d.cached === true ? { ...r, reason: "cacheBlock" } : r;
  }

  /** The answer when the server gave none: let through, as @upstash/ratelimit does. */
  private timedOut(error: unknown): RatelimitResponse {
    if (!(error instanceof UnavailableError)) throw error;
    return { success: true, limit: this.algorithm.tokens, remaining: 0, reset: 0, pending: Promise.resolve(), reason: "timeout" };
  }

  /** Decides one request of `identifier` (taking `rate` units): one command. */
  async limit(identifier: string, options: LimitOptions = {}): Promise<RatelimitResponse> {
    const call = { ...(options.rate === undefined ? {} : { cost: options.rate }), ...(options.signal === undefined ? {} : { signal: options.signal }) };
    const signal = options.signal === undefined ? {} : { signal: options.signal };
    const values = this.protection ? [options.ip, options.userAgent, options.country].filter((v): v is string => v !== undefined && v !== "") : [];
    try {
      if (values.length > 0) return await this.limitChecked(identifier, values, call, signal);
      const d = await this.decideOne(identifier, call);
      const r = this.response(d);
      if (d.allowed || d.cached === true || !this.protection) return r;
      const denied = await this.limiter.raw(["RL.DENIED", this.key(identifier)], signal);
      return denied === null ? r : this.deniedBy(r, identifier);
    } catch (error) {
      return this.timedOut(error);
    }
  }

  /** `r` answered as denied by the deny list's entry for `value`. */
  private deniedBy(r: RatelimitResponse, value: string): RatelimitResponse {
    return { ...r, success: false, remaining: 0, reason: "denyList", deniedValue: value };
  }

  /**
   * The decision with the identifier and `values` checked against the deny
   * list: one `RL.DENIED` each, sent with the decision (one round trip); a
   * denied value gives back what the decision charged.
   */
  private async limitChecked(identifier: string, values: readonly string[], call: { readonly cost?: number; readonly signal?: AbortSignal }, signal: { readonly signal?: AbortSignal }): Promise<RatelimitResponse> {
    const checked = [identifier, ...values];
    const lookups = checked.map((v) => this.limiter.raw(["RL.DENIED", this.key(v)], signal));
    const decided = this.decideOne(identifier, call);
    for (const p of lookups) p.catch(() => undefined);
    const d = await decided;
    const found = await Promise.all(lookups);
    const index = found.findIndex((reply) => reply !== null);
    const r = this.response(d);
    const value = checked[index];
    if (value === undefined) return r;
    // What the limit charged is given back: a denied request takes nothing (as the server's own deny list).
    if (d.allowed && d.cached !== true && d.fallback === undefined) await this.decideOne(identifier, { refund: call.cost ?? 1 });
    return this.deniedBy(r, value);
  }

  /** One decision: under the dynamic limit when one is set, else the algorithm's. */
  private async decideOne(identifier: string, call: { readonly cost?: number; readonly refund?: number; readonly signal?: AbortSignal }): Promise<Decision> {
    if (this.dynamic) {
      try {
        return await this.limiter.check(this.key(identifier), [this.dynamicName], call);
      } catch (error) {
        if (!(error instanceof ReplyError && /no policy named/.test(error.message))) throw error;
      }
    }
    return this.limiter.decide(this.key(identifier), this.decisive(), call);
  }

  /**
   * Waits until the request may pass, or `timeout` ms have passed: one
   * command that waits on the server (`WAIT`), first come first served, no
   * polling, on a connection of its own (from a bounded pool opened with
   * the client's `duplicate()`), so that `limit()` calls are never queued
   * behind it.
   */
  async blockUntilReady(identifier: string, timeout: number, options: { readonly signal?: AbortSignal } = {}): Promise<RatelimitResponse> {
    if (timeout <= 0) throw new Error("timeout must be positive");
    try {
      const call = { wait: Math.ceil(timeout), ...(options.signal === undefined ? {} : { signal: options.signal }) };
      return this.response(await this.limiter.decide(this.key(identifier), this.decisive(), call));
    } catch (error) {
      return this.timedOut(error);
    }
  }

  /** What `identifier` has left now, changing nothing (`RL.PEEK`). */
  async getRemaining(identifier: string): Promise<{ remaining: number; reset: number; limit: number }> {
    const d = await this.limiter.peek(this.key(identifier), this.algorithm.policy);
    return { remaining: d.remaining, reset: Date.now() + d.resetAfterMs, limit: this.algorithm.tokens };
  }

  /** Forgets `identifier`'s use: its limit is full again (`DEL`). */
  async resetUsedTokens(identifier: string): Promise<void> {
    await this.limiter.raw(["DEL", this.key(identifier)]);
  }

  private decisive(): Exclude<Policy, { type: "concurrency" | "policy" }> {
    const policy = this.algorithm.policy;
    if (policy.type === "concurrency" || policy.type === "policy") throw new TypeError("not a rate limit");
    return policy;
  }
}

/**
 * @upstash/ratelimit's `MultiRegionRatelimit` is not offered: it keeps one
 * count per region and reconciles them in the background, so a limit holds
 * only eventually. Here every decision is made atomically by one server
 * (one primary, or a cluster's shard): construct a {@link Ratelimit} over
 * the server all regions reach. The constructor throws, naming this.
 */
// eslint-disable-next-line @typescript-eslint/no-extraneous-class -- a constructor that refuses, by design
export class MultiRegionRatelimit {
  /** Always throws: see the class's documentation. */
  constructor(config?: unknown) {
    throw new Error(
      (config === undefined ? "" : "given a configuration: ") +
        "MultiRegionRatelimit is not offered: the redis-ratelimit module decides each limit atomically on one server, with no " +
        "cross-server synchronisation; use a Ratelimit over the one server (or cluster) every region reaches",
    );
  }
}

export type { RedisLike } from "./client.js";
