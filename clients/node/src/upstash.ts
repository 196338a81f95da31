import { type RedisLike, type SendCommand, send, toSendCommand } from "./client.js";
import type { Decision } from "./decision.js";
import type { Duration, DurationUnit } from "./duration.js";
import { RateLimiter } from "./limiter.js";
import type { Policy } from "./policy.js";

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
  /** Resolved at once: there is no background work (no analytics, no multi-region sync). */
  readonly pending: Promise<unknown>;
  /** `"timeout"` when Redis did not answer within `timeout` and the request was let through. */
  readonly reason?: "timeout";
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
   * ms (default 5000; 0 waits for ever), as @upstash/ratelimit does, with
   * `reason: "timeout"`.
   */
  readonly timeout?: number;
}

/** The options of {@link Ratelimit.limit}. */
export interface LimitOptions {
  /** The units this request takes (default 1). */
  readonly rate?: number;
}

function moduleDuration(duration: UpstashDuration): Duration {
  const match = /^(\d+) ?(ms|s|m|h|d|w)$/.exec(duration);
  if (match === null) throw new TypeError(`invalid duration '${duration}': expected e.g. "10 s", "1m", "250ms"`);
  const [, n = "0", unit = "s"] = match;
  return (unit === "w" ? `${BigInt(n) * 7n}d` : `${n}${unit}`) as Duration;
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
  private readonly sendCommand: SendCommand;
  private readonly algorithm: Algorithm;
  private readonly prefix: string;
  private readonly timeout: number;

  /** A rate limit over `config.redis`. */
  constructor(config: RatelimitConfig) {
    this.sendCommand = toSendCommand(config.redis);
    this.limiter = new RateLimiter(this.sendCommand);
    this.algorithm = config.limiter;
    this.prefix = config.prefix ?? "@upstash/ratelimit";
    this.timeout = config.timeout ?? 5000;
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
    return { success: d.allowed, limit: this.algorithm.tokens, remaining: d.remaining, reset: Date.now() + wait, pending: Promise.resolve() };
  }

  /** `promise`, or `fallback()` once `ms` have passed (never with `ms` 0). */
  private async within<T>(promise: Promise<T>, ms: number, fallback: () => T): Promise<T> {
    if (ms <= 0) return promise;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<T>((resolve) => {
      timer = setTimeout(() => {
        resolve(fallback());
      }, ms);
    });
    try {
      return await Promise.race([promise, late]);
    } finally {
      clearTimeout(timer);
    }
  }

  private timedOut(): RatelimitResponse {
    return { success: true, limit: 0, remaining: 0, reset: 0, pending: Promise.resolve(), reason: "timeout" };
  }

  /** Decides one request of `identifier` (taking `rate` units): one command. */
  limit(identifier: string, options: LimitOptions = {}): Promise<RatelimitResponse> {
    const cost = options.rate === undefined ? {} : { cost: options.rate };
    const decision = this.limiter.decide(this.key(identifier), this.decisive(), cost);
    return this.within(
      decision.then((d) => this.response(d)),
      this.timeout,
      () => this.timedOut(),
    );
  }

  /**
   * Waits until the request may pass, or `timeout` ms have passed: one
   * command that waits on the server (`WAIT`), first come first served, no
   * polling. The call holds its connection while it waits.
   */
  async blockUntilReady(identifier: string, timeout: number): Promise<RatelimitResponse> {
    if (timeout <= 0) throw new Error("timeout must be positive");
    const decision = this.limiter.decide(this.key(identifier), this.decisive(), { wait: Math.ceil(timeout) });
    const bound = this.timeout <= 0 ? 0 : this.timeout + Math.ceil(timeout);
    return this.within(
      decision.then((d) => this.response(d)),
      bound,
      () => this.timedOut(),
    );
  }

  /** What `identifier` has left now, changing nothing (`RL.PEEK`). */
  async getRemaining(identifier: string): Promise<{ remaining: number; reset: number; limit: number }> {
    const d = await this.limiter.peek(this.key(identifier), this.algorithm.policy);
    return { remaining: d.remaining, reset: Date.now() + d.resetAfterMs, limit: this.algorithm.tokens };
  }

  /** Forgets `identifier`'s use: its limit is full again (`DEL`). */
  async resetUsedTokens(identifier: string): Promise<void> {
    await send(this.sendCommand, ["DEL", this.key(identifier)]);
  }

  private decisive(): Exclude<Policy, { type: "concurrency" | "policy" }> {
    const policy = this.algorithm.policy;
    if (policy.type === "concurrency" || policy.type === "policy") throw new TypeError("not a rate limit");
    return policy;
  }
}

export type { RedisLike } from "./client.js";
