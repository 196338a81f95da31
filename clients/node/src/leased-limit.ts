import { Decision, type Described } from "./decision.js";
import { durationMillis } from "./duration.js";
import { UnavailableError } from "./errors.js";
import type { CallOptions } from "./guard.js";
import type { Fallback, RateLimiter } from "./limiter.js";
import { type BucketPolicy, type FixedPolicy, type GcraPolicy, type SlidingPolicy, policyQuota } from "./policy.js";

/** The policies a block can be leased from (those that take `COST k PARTIAL` and `REFUND n`). */
export type LeasablePolicy = GcraPolicy | BucketPolicy | SlidingPolicy | FixedPolicy;

/** How a {@link LeasedLimit} takes its blocks. */
export interface LeasedLimitOptions {
  /** Units asked for in one call (`COST block PARTIAL`): 1 to 10,000. */
  readonly block: number;
  /** The limit's name in the headers (default `"default"`). */
  readonly name?: string;
  /** The answer when the server gives none to a block call (default: the limiter's). */
  readonly fallback?: Fallback;
  /**
   * Queue for whole blocks on the server while the key is contended
   * (`COST block WAIT queue`), waiting up to this many ms in line
   * (default: never queue). See {@link LeasedLimit}.
   */
  readonly queue?: number;
}

/** Options of {@link LeasedLimit.acquire}. */
export interface LeasedAcquireOptions extends CallOptions {
  /** Units this request takes (default 1). */
  readonly cost?: number;
}

/** The most units one block holds (a bound on what one process can hold unused). */
export const MAX_BLOCK = 10_000;

/** The longest a lease waits between calls while queueing (ms). */
const MAX_GAP_MS = 1000;

/** What the processes together should leave on the server between calls: one to three blocks (at most a quarter to three quarters of the limit). */
function band(block: number, limit: number): { low: number; high: number } {
  const low = Math.min(block, Math.floor(limit / 4));
  const high = Math.min(block * 3, Math.floor((limit * 3) / 4));
  return { low, high: Math.max(high, low + 1) };
}

/** The ms one unit of `policy` takes to come back, or `undefined` (windows). */
function unitMs(policy: LeasablePolicy): number | undefined {
  if (policy.type !== "gcra" && policy.type !== "bucket") return undefined;
  const ms = durationMillis(policy.period);
  const units = Number(policy.type === "gcra" ? policy.limit : policy.refill);
  return ms === undefined || !(units > 0) ? undefined : Number(ms) / units;
}

/**
 * One key's limit taken from the server in blocks and admitted locally, as
 * the Rust client's `LeasedLimit`: one `COST block PARTIAL` call serves up
 * to `block` requests in this process, and {@link release} gives back what
 * is left with `REFUND`.
 *
 * - One call out at a time: the requests that find the block spent wait for
 *   it (within their own deadline or signal) and take its units. What the
 *   server grants lands in the block even when every caller gave up; a call
 *   whose own deadline passed has its late grant refunded by the limiter.
 * - Between blocks: a call that came back short (fewer than `block` units:
 *   the key is contended or nearly spent) is followed by the next one only
 *   once the missing units could have accrued (`(block − granted) ×` the
 *   time one unit takes; for windows the server's `retryAfterMs`); a call
 *   granted nothing waits the longer of the server's `retryAfterMs` and a
 *   whole block's time. Until then requests are denied locally, their
 *   `retryAfterMs` the time left.
 * - The bound: what the processes admit in any window can exceed the limit
 *   by at most what they hold unused, `block` × processes.
 * - A request costing more than `block` is decided by the server directly.
 * - With `queue` (ms), the key's processes take whole blocks in turn, as
 *   the Rust client's `LeasePlan::queued`: from the first call, and again
 *   whenever a block comes back short or denied, the block call queues on
 *   the server for the next whole block (`COST block WAIT queue`, first
 *   come first served among the processes), on a connection of its own
 *   from the limiter's wait pool, so that every call gets `block` units and
 *   nobody is denied while the line moves. A queued block that leaves
 *   whole blocks unused on the server (three blocks, or three quarters of
 *   the limit) says the key is no longer contended: the next call asks
 *   with `PARTIAL` again. A queued call denied (its place lies beyond
 *   `queue`) calls again once its place would be within it (at most 1 s
 *   later). Requests waiting for a queued call wait up to the limiter's
 *   timeout plus `queue` by default. The queued call has its own deadline
 *   (the limiter's timeout plus `queue`) and no caller's signal: callers
 *   that give up leave it to land in the block; given up at its own
 *   deadline after it was written, it keeps its place in line and what
 *   its late reply took is refunded.
 */
export class LeasedLimit {
  /** Units this process holds, taken from the server and not yet admitted. */
  held = 0;
  /** Commands sent for this key: block calls and refunds. */
  commands = 0;
  private calling: Promise<Decision> | undefined;
  /** `performance.now()` before which no block call is made. */
  private dueAt = 0;
  private lastUse = 0;
  private limitSeen = 0;
  /** Others use the key: the next call queues (with `queue`). */
  private contended: boolean;
  private readonly described: Described;

  /** A leased limit on `key` under `policy`, its calls sent by `limiter`. */
  constructor(
    readonly limiter: RateLimiter,
    readonly key: string,
    readonly policy: LeasablePolicy,
    readonly options: LeasedLimitOptions,
  ) {
    if (!Number.isInteger(options.block) || options.block < 1 || options.block > MAX_BLOCK)
      throw new RangeError(`block must be an integer from 1 to ${MAX_BLOCK}, got ${options.block}`);
    if (options.queue !== undefined && !(Number.isFinite(options.queue) && options.queue > 0))
      throw new RangeError(`queue must be a positive number of ms, got ${options.queue}`);
    this.contended = options.queue !== undefined;
    this.described = { name: options.name ?? "default", quota: policyQuota(policy) };
  }

  /** Whether the next block call queues on the server. */
  get queues(): boolean {
    return this.contended && this.options.queue !== undefined;
  }

  /** Admits a request from the block, taking a new block when it is spent. */
  async acquire(options: LeasedAcquireOptions = {}): Promise<Decision> {
    const cost = options.cost ?? 1;
    if (!Number.isInteger(cost) || cost < 0) throw new RangeError(`cost must be a non-negative integer, got ${cost}`);
    if (cost > this.options.block) return this.limiter.decide(this.key, this.policy, { ...options, cost, name: this.described.name });
    options.signal?.throwIfAborted();
    const deadline = performance.now() + (options.timeout ?? this.limiter.guard.timeoutMs + (this.options.queue ?? 0));
    let last: Decision | undefined;
    for (;;) {
      this.lastUse = performance.now();
      if (this.held >= cost) {
        this.held -= cost;
        return this.local(true, null);
      }
      // Another request's call is out: its block is ours to share.
      if (this.calling !== undefined) {
        last = await this.within(this.calling, deadline, options.signal);
        if (last === undefined) return this.timedOut();
        continue;
      }
      // The previous call answered this request already: no second call for it.
      if (last !== undefined && (last.fallback !== undefined || !last.allowed)) return last.fallback !== undefined ? last : this.denied();
      const now = performance.now();
      if (now < this.dueAt) return this.denied();
      this.calling = this.call();
      const mine = this.calling;
      void mine.finally(() => {
        if (this.calling === mine) this.calling = undefined;
      });
      last = await this.within(mine, deadline, options.signal);
      if (last === undefined) return this.timedOut();
    }
  }

  /** One block call; its grant lands in `held` whoever waits for it. */
  private async call(): Promise<Decision> {
    this.commands++;
    const block = this.options.block;
    const queue = this.options.queue;
    if (queue !== undefined && this.contended) return this.queued(block, queue);
    const d = await this.limiter.decide(this.key, this.policy, {
      cost: block,
      partial: true,
      name: this.described.name,
      ...(this.options.fallback === undefined ? {} : { fallback: this.options.fallback }),
    });
    if (d.fallback !== undefined) return d;
    this.limitSeen = d.limit;
    const granted = d.allowed ? (d.granted ?? 0) : 0;
    this.held += granted;
    const unit = unitMs(this.policy);
    const now = performance.now();
    if (granted < block && queue !== undefined) {
      // Contended: queue for the next whole block at once; the server paces the line.
      this.contended = true;
      this.dueAt = 0;
    } else if (granted === 0) this.dueAt = now + Math.max(d.retryAfterMs ?? 0, unit === undefined ? 0 : unit * block);
    else if (granted < block) this.dueAt = now + (unit === undefined ? (d.retryAfterMs ?? 0) : unit * (block - granted));
    else this.dueAt = 0;
    return d;
  }

  /** A queued block call (`COST block WAIT queue`); its grant lands in `held` whoever waits for it. */
  private async queued(block: number, queue: number): Promise<Decision> {
    const fallback = this.options.fallback ?? this.limiter.defaultFallback;
    const d = await this.limiter.queuedBlock(this.key, this.policy, block, queue, this.described.name, fallback);
    if (d.fallback !== undefined) return d;
    this.limitSeen = d.limit;
    const now = performance.now();
    if (d.allowed) {
      this.held += block;
      // Whole blocks left unused: nobody else is waiting for them.
      this.contended = d.remaining < band(block, d.limit).high;
      this.dueAt = 0;
      return d;
    }
    if (d.retryAfterMs !== null) {
      // Its place lay beyond the queue's wait (or the line was full): call again when it would be within it,
      // and not before a block could accrue.
      const unit = unitMs(this.policy);
      const accrual = d.remaining === 0 && unit !== undefined ? unit * block : 0;
      this.dueAt = now + Math.min(MAX_GAP_MS, Math.max(d.retryAfterMs - queue, accrual));
    } else {
      // A block that can never be admitted at once: ask for what fits instead.
      this.contended = false;
      this.dueAt = 0;
    }
    return d;
  }

  /** `promise`'s value, or `undefined` at the deadline; rejects with the signal's reason when it aborts. */
  private within(promise: Promise<Decision>, deadline: number, signal: AbortSignal | undefined): Promise<Decision | undefined> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        done();
        resolve(undefined);
      }, Math.max(0, deadline - performance.now()));
      const onAbort = (): void => {
        done();
        reject(signal?.reason as Error);
      };
      const done = (): void => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      promise.then(
        (d) => {
          done();
          resolve(d);
        },
        (error: unknown) => {
          done();
          reject(error instanceof Error ? error : new Error(String(error)));
        },
      );
    });
  }

  private local(allowed: boolean, retryAfterMs: number | null): Decision {
    return new Decision({ allowed, limit: this.limitSeen, remaining: this.held, retryAfterMs, resetAfterMs: 0, leased: true }, this.described);
  }

  private denied(): Decision {
    return this.local(false, Math.max(1, Math.ceil(this.dueAt - performance.now())));
  }

  /** The request's deadline passed while a block call was out: the fallback. */
  private timedOut(): Decision {
    const fallback = this.options.fallback ?? this.limiter.defaultFallback;
    const error = new UnavailableError("timeout", "RL.LEASE");
    if (fallback === "error") throw error;
    const open = fallback === "open";
    return new Decision({ allowed: open, limit: 0, remaining: 0, retryAfterMs: open ? null : 1000, resetAfterMs: 0, fallback: "timeout" }, this.described);
  }

  /** Whether no request used the block for `idleMs`. */
  idleFor(idleMs: number): boolean {
    return performance.now() - this.lastUse >= idleMs;
  }

  /**
   * Gives back every unit held (`REFUND n`), at shutdown or when idle; `true`
   * when nothing is held any more. Units whose refund got no answer are
   * kept, for a later release.
   */
  async release(options: CallOptions = {}): Promise<boolean> {
    if (this.calling !== undefined) await this.calling.catch(() => undefined);
    const units = this.held;
    if (units === 0) return true;
    this.held = 0;
    this.commands++;
    try {
      await this.limiter.decide(this.key, this.policy, { ...options, refund: units, fallback: "error", name: this.described.name });
      return true;
    } catch (error) {
      this.held += units;
      if (error instanceof UnavailableError) return false;
      throw error;
    }
  }
}
