import type { ClientRateLimitInfo, IncrementResponse, Options, Store } from "express-rate-limit";
import { type RedisLike, type SendCommand, send, toSendCommand } from "./client.js";
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
  /** Prepended to every key (default `"rl:"`, as rate-limit-redis). */
  readonly prefix?: string;
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

  /** A store sending its commands with `options.sendCommand` or `options.client`. */
  constructor(options: RedisRateLimitStoreOptions) {
    const { sendCommand, client } = options;
    if (sendCommand !== undefined) this.sendCommand = (args) => sendCommand(...args);
    else if (client !== undefined) this.sendCommand = toSendCommand(client);
    else throw new TypeError("RedisRateLimitStore needs sendCommand or client");
    this.prefix = options.prefix ?? "rl:";
    this.window = options.window ?? "fixed";
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
    const reply = await send(this.sendCommand, [command, this.prefix + key, ...policy, ...extra]);
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
    const reply = await send(this.sendCommand, ["RL.PEEK", this.prefix + key, ...words]);
    const d = parseDecision(reply, { name: "", quota: undefined }, false);
    const totalHits = COUNT_MAX - d.remaining;
    if (totalHits <= 0 && d.resetAfterMs === 0) return undefined;
    return { totalHits, resetTime: new Date(Date.now() + d.resetAfterMs) };
  }

  /** Forgets the key's hits (`DEL`). */
  async resetKey(key: string): Promise<void> {
    await send(this.sendCommand, ["DEL", this.prefix + key]);
  }

  /** Nothing to release: the Redis client is the application's, which closes it. */
  shutdown(): void {
    // The connection belongs to the caller.
  }
}
