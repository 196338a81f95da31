import type { ClientRateLimitInfo, IncrementResponse, Options, Store } from "express-rate-limit";
import { type RawReply, type RedisLike, type SendCommand, toSendCommand } from "./client.js";
import { UnavailableError } from "./errors.js";
import { DEFAULT_TIMEOUT_MS, Guard, type Undo, toTransport } from "./guard.js";
import { parseDecision } from "./reply.js";

/** How {@link RedisRateLimitStore} is set up. */
export interface RedisRateLimitStoreOptions {
  /**
   * Sends one command, its words as arguments, exactly as rate-limit-redis
   * takes it (node-redis: `(...args) => client.sendCommand(args)`; ioredis:
   * `(command, ...args) => client.call(command, ...args)`), so that moving
   * from rate-limit-redis changes only the class name.
   */
  readonly sendCommand?: (...args: string[]) => Promise<unknown>;
  /** Or a node-redis / ioredis client, used through its raw-command call. */
  readonly client?: RedisLike;
  /**
   * Prepended to every key (default `"ratelimit:"`: not rate-limit-redis's
   * `"rl:"`, whose keys hold another type, so that the two can run side by
   * side while moving from one to the other).
   */
  readonly prefix?: string;
  /** Each command's deadline in ms (default 300, as the Rust and Python clients). */
  readonly timeout?: number;
  /**
   * The answer when the server gives none (the deadline passed, or the
   * connection is known down): `"error"` (the default) throws, and
   * express-rate-limit's `passOnStoreError` decides (`false`: the error
   * goes to express, a 500; `true`: the request passes); `"open"` counts
   * nothing (the request passes); `"closed"` answers over any limit, a
   * 429 with `Retry-After: 1`.
   */
  readonly fallback?: "error" | "open" | "closed";
  /**
   * `"fixed"` (the default): express-rate-limit's own semantics, a count
   * per window that starts at a key's first hit. `"sliding"`: the
   * module's two-window estimate (`RL.SLIDING APPROX`), so that a client
   * cannot send twice the limit around a window's end; `totalHits` is then
   * the estimate, rounded up.
   */
  readonly window?: "fixed" | "sliding";
}

/**
 * The count every hit is admitted against: each hit is counted, as
 * express-rate-limit's stores count (it compares the count with its
 * `limit` itself, which may be a function of the request), and the
 * module's `remaining` stays a number that the clients parse exactly
 * (near 2^53 they do not).
 */
const COUNT_MAX = 1e15;
const COUNT_LIMIT = String(COUNT_MAX);

/**
 * An express-rate-limit `Store` on the redis-ratelimit module: each hit
 * is one atomic command on the server's clock (`RL.FIXED`, or
 * `RL.SLIDING APPROX`), with no script to load and no second round trip.
 * `rateLimit({ store })` keeps every option: `limit` (a number or a
 * function), `windowMs`, `skipFailedRequests` / `skipSuccessfulRequests`
 * (a decrement is a `REFUND 1`), the headers of every draft, `resetKey`
 * and `getKey`.
 *
 * @example
 * ```ts
 * app.use(rateLimit({ windowMs: 60_000, limit: 100, store: new RedisRateLimitStore({ sendCommand: (...args) => client.sendCommand(args) }) }));
 * ```
 */
export class RedisRateLimitStore implements Store {
  /** The raw-command call. */
  readonly sendCommand: SendCommand;
  /** Prepended to every key. */
  readonly prefix: string;
  /** Keys live in Redis: one store's hits are every store's. */
  readonly localKeys = false;
  /** The window's kind. */
  readonly window: "fixed" | "sliding";
  /** The window's length in ms, from the middleware's `windowMs` (set by `init`). */
  windowMs = 60_000;
  /** Deadlines and the circuit. */
  readonly guard: Guard;
  private readonly fallback: "error" | "open" | "closed";

  /** A store sending its commands with `options.sendCommand` or `options.client`. */
  constructor(options: RedisRateLimitStoreOptions) {
    const { sendCommand, client } = options;
    const timeout = options.timeout ?? DEFAULT_TIMEOUT_MS;
    if (sendCommand !== undefined) {
      this.sendCommand = (args) => sendCommand(...args);
      this.guard = new Guard(toTransport(this.sendCommand), timeout);
    } else if (client !== undefined) {
      this.sendCommand = toSendCommand(client);
      this.guard = new Guard(toTransport(client), timeout);
    } else throw new TypeError("RedisRateLimitStore needs sendCommand or client");
    this.prefix = options.prefix ?? "ratelimit:";
    this.window = options.window ?? "fixed";
    this.fallback = options.fallback ?? "error";
  }

  private send(args: string[], undo?: Undo): Promise<RawReply> {
    return this.guard.call(args, {}, 0, undo);
  }

  /** Takes the middleware's `windowMs`. */
  init(options: Options): void {
    this.windowMs = options.windowMs;
  }

  private policy(): string[] {
    const window = `${Math.max(1, Math.ceil(this.windowMs))}ms`;
    return this.window === "sliding" ? ["RL.SLIDING", COUNT_LIMIT, window, "APPROX"] : ["RL.FIXED", COUNT_LIMIT, window];
  }

  private async command(key: string, extra: string[]): Promise<ClientRateLimitInfo> {
    const [command = "", ...policy] = this.policy();
    let reply: RawReply;
    try {
      const base = [command, this.prefix + key, ...policy];
      // A hit whose caller stopped waiting is taken back when its late reply lands.
      reply = await this.send([...base, ...extra], extra.length === 0 ? () => [...base, "REFUND", "1"] : undefined);
    } catch (error) {
      if (!(error instanceof UnavailableError) || this.fallback === "error") throw error;
      // Open: nothing counted; closed: over any limit, back in a second.
      return { totalHits: this.fallback === "open" ? 0 : COUNT_MAX, resetTime: new Date(Date.now() + 1000) };
    }
    const d = parseDecision(reply, { name: "", quota: undefined }, false);
    return { totalHits: COUNT_MAX - d.remaining, resetTime: new Date(Date.now() + d.resetAfterMs) };
  }

  /** Counts a hit: one `RL.FIXED` (or `RL.SLIDING`) command. */
  increment(key: string): Promise<IncrementResponse> {
    return this.command(key, []);
  }

  /** Takes a hit back (`REFUND 1`): the request was skipped after all. */
  async decrement(key: string): Promise<void> {
    await this.command(key, ["REFUND", "1"]);
  }

  /** The key's count and reset, read-only (`RL.PEEK`); `undefined` when it has none. */
  async get(key: string): Promise<ClientRateLimitInfo | undefined> {
    const [command = "", ...policy] = this.policy();
    const words = command === "RL.SLIDING" ? ["SLIDING", ...policy] : ["FIXED", ...policy];
    const reply = await this.send(["RL.PEEK", this.prefix + key, ...words]);
    const d = parseDecision(reply, { name: "", quota: undefined }, false);
    const totalHits = COUNT_MAX - d.remaining;
    if (totalHits <= 0 && d.resetAfterMs === 0) return undefined;
    return { totalHits, resetTime: new Date(Date.now() + d.resetAfterMs) };
  }

  /** Forgets the key's hits (`DEL`). */
  async resetKey(key: string): Promise<void> {
    await this.send(["DEL", this.prefix + key]);
  }

  /** Stops probing a connection known down; the Redis client is the application's, which closes it. */
  shutdown(): void {
    this.guard.close();
  }
}
