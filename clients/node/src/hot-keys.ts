import type { Decision } from "./decision.js";
import { UnavailableError } from "./errors.js";
import { type LeasablePolicy, LeasedLimit, MAX_BLOCK } from "./leased-limit.js";
import type { DecideOptions, RateLimiter } from "./limiter.js";
import type { RawReply } from "./client.js";

/** How {@link HotKeyLeases} picks and leases its hot keys. */
export interface HotKeyOptions {
  /** Units per block call of a hot key. */
  readonly block: number;
  /** Keys asked for in each poll (`RL.HOTKEYS COUNT n`): 1 to 1000, default 10. */
  readonly count?: number;
  /** A listed key turns hot once its rate less its error is at least this many decisions a second (default 100). */
  readonly perSecond?: number;
  /** The limit's name in the headers (default `"default"`). */
  readonly name?: string;
  /** Each hot key's lease queues for whole blocks while contended, up to this many ms (see {@link LeasedLimit}); default never. */
  readonly queue?: number;
}

/** The default poll interval of {@link HotKeyLeases.follow} (ms). */
export const DEFAULT_HOT_KEYS_POLL_MS = 1000;

/** A key as `RL.HOTKEYS` shows it: its first 64 bytes. */
function shown(key: string): string {
  const bytes = Buffer.from(key, "utf8");
  return bytes.length <= 64 ? key : bytes.subarray(0, 64).toString("utf8");
}

/** The text of a reply string (node-redis and ioredis may return buffers). */
function text(value: RawReply | undefined): string | undefined {
  if (typeof value === "string") return value;
  if (value instanceof Uint8Array) return Buffer.from(value).toString("utf8");
  return undefined;
}

/** A number of a reply (an integer, a double as text in RESP2, a double in RESP3). */
function num(value: RawReply | undefined): number {
  if (typeof value === "number") return value;
  if (typeof value === "bigint") return Number(value);
  const t = text(value);
  return t === undefined ? Number.NaN : Number(t);
}

/**
 * One limit over many keys, each decided per request by its own command,
 * except the keys the server names hot (`RL.HOTKEYS`, on a server with
 * `ratelimit.hot-key-counters` above 0): those are leased in blocks
 * ({@link LeasedLimit}) without configuration. A key turns hot when a poll
 * lists it at a rate (less its error) of at least `perSecond`, stays hot
 * while listed, and once it drops out of the list its units are refunded
 * and it is decided per request again. At most `count` keys are hot at once.
 */
export class HotKeyLeases {
  /** Hot keys as listed (first 64 bytes) → the lease of the full key decided under it, once one is. */
  private readonly hot = new Map<string, LeasedLimit | null>();
  private timer: NodeJS.Timeout | undefined;
  private polling = false;
  /** Polls sent (`RL.HOTKEYS`). */
  polls = 0;

  /** Hot keys of `policy`'s limit, polled and leased through `limiter`. */
  constructor(
    readonly limiter: RateLimiter,
    readonly policy: LeasablePolicy,
    readonly options: HotKeyOptions,
  ) {
    const count = options.count ?? 10;
    if (!Number.isInteger(count) || count < 1 || count > 1000) throw new RangeError(`count must be an integer from 1 to 1000, got ${count}`);
    if (!Number.isInteger(options.block) || options.block < 1 || options.block > MAX_BLOCK)
      throw new RangeError(`block must be an integer from 1 to ${MAX_BLOCK}, got ${options.block}`);
    if (options.queue !== undefined && !(Number.isFinite(options.queue) && options.queue > 0))
      throw new RangeError(`queue must be a positive number of ms, got ${options.queue}`);
  }

  /** A decision on `key`: from its block when hot, else by its own command. */
  decide(key: string, options: DecideOptions = {}): Promise<Decision> {
    const name = this.options.name ?? "default";
    const lease = options.wait === undefined && options.dryRun !== true ? this.leaseFor(key) : undefined;
    if (lease !== undefined) {
      const cost = options.cost === undefined ? 1 : Number(options.cost);
      return lease.acquire({ cost, ...(options.timeout === undefined ? {} : { timeout: options.timeout }), ...(options.signal === undefined ? {} : { signal: options.signal }) });
    }
    return this.limiter.decide(key, this.policy, { name, ...options });
  }

  /** The lease of `key` if it is hot (opened at its first decision), else `undefined`. */
  private leaseFor(key: string): LeasedLimit | undefined {
    const listed = shown(key);
    const lease = this.hot.get(listed);
    if (lease === undefined) return undefined;
    if (lease !== null && lease.key === key) return lease;
    // Another key with the same first 64 bytes held it: it goes back to the server.
    if (lease !== null) void lease.release().catch(() => undefined);
    const opened = new LeasedLimit(this.limiter, key, this.policy, {
      block: this.options.block,
      ...(this.options.name === undefined ? {} : { name: this.options.name }),
      ...(this.options.queue === undefined ? {} : { queue: this.options.queue }),
    });
    this.hot.set(listed, opened);
    return opened;
  }

  /** The keys hot now, as the server lists them (their first 64 bytes). */
  hotKeys(): string[] {
    return [...this.hot.keys()];
  }

  /** The lease of a hot key (for its counts), or `undefined`. */
  leaseOf(key: string): LeasedLimit | undefined {
    const lease = this.hot.get(shown(key));
    return lease !== null && lease?.key === key ? lease : undefined;
  }

  /**
   * One poll: `RL.HOTKEYS COUNT n` within the limiter's deadline, then the
   * listed keys at the threshold turn hot (their full key is the one they
   * are decided under next: a listed key is known by its first 64 bytes)
   * and those no longer listed are refunded and decided per request again.
   */
  async refresh(): Promise<void> {
    this.polls++;
    const reply = await this.limiter.raw(["RL.HOTKEYS", "COUNT", String(this.options.count ?? 10)]);
    const listed = new Map<string, number>();
    if (Array.isArray(reply)) {
      for (const entry of reply) {
        if (!Array.isArray(entry)) continue;
        const key = text(entry[0]);
        if (key !== undefined) listed.set(key, num(entry[1]) - num(entry[2]));
      }
    }
    const threshold = this.options.perSecond ?? 100;
    for (const [key, lease] of this.hot) {
      if (listed.has(key)) continue;
      this.hot.delete(key);
      if (lease !== null) await lease.release().catch(() => undefined);
    }
    for (const [key, rate] of listed) {
      if (this.hot.has(key) || !(rate >= threshold)) continue;
      this.hot.set(key, null);
    }
  }

  /**
   * Polls every `everyMs` (default 1 s), one poll at a time; a poll that
   * fails waits twice as long before the next, up to 16 times `everyMs`.
   * The timer does not keep the process alive; {@link close} stops it.
   */
  follow(everyMs: number = DEFAULT_HOT_KEYS_POLL_MS): void {
    if (!(everyMs > 0)) throw new RangeError(`everyMs must be positive, got ${everyMs}`);
    this.stop();
    let wait = everyMs;
    const tick = (): void => {
      this.timer = setTimeout(() => {
        if (this.polling) return;
        this.polling = true;
        this.refresh().then(
          () => {
            wait = everyMs;
          },
          (error: unknown) => {
            if (!(error instanceof UnavailableError)) process.emitWarning(`redis-ratelimit: RL.HOTKEYS failed: ${String(error)}`, { code: "RATELIMIT_HOTKEYS" });
            wait = Math.min(wait * 2, everyMs * 16);
          },
        ).finally(() => {
          this.polling = false;
          if (this.timer !== undefined) tick();
        });
      }, wait);
      this.timer.unref();
    };
    tick();
  }

  private stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** Stops polling and refunds every hot key's units. */
  async close(): Promise<void> {
    this.stop();
    const leases = [...this.hot.values()];
    this.hot.clear();
    await Promise.all(leases.map((l) => (l === null ? Promise.resolve(true) : l.release().catch(() => false))));
  }
}

