import { type RawReply, type RedisLike, type SendCommand, send, toSendCommand } from "./client.js";
import { AllDecision, Decision, type Described } from "./decision.js";
import { type Duration, durationArg } from "./duration.js";
import { parseAllDecision, parseBigInteger, parseDecision, parseInteger } from "./reply.js";
import {
  type BucketPolicy,
  type ConcurrencyPolicy,
  type Count,
  type FixedPolicy,
  type GcraPolicy,
  type Policy,
  type SlidingPolicy,
  policyArgs,
  policyQuota,
  policyWords,
  rateQuota,
} from "./policy.js";

/** Options every call takes. */
export interface NameOption {
  /** The limit's name in {@link Decision.headers} (default `"default"`). */
  readonly name?: string;
}

/** `WAIT timeout [FLOW name [WEIGHT w]]`: wait on the server to be admitted instead of being denied. */
export interface WaitOptions {
  /**
   * Wait up to this long, first come first served, instead of being
   * denied. The call holds its connection while it waits: send it on a
   * connection of its own (node-redis `client.duplicate()`, a second ioredis
   * client).
   */
  readonly wait?: Duration;
  /** With `wait`: the flow (tenant) this waiter belongs to; flows share the key's admissions by weight. */
  readonly flow?: string;
  /** With `flow`: its weight, 1 to 1000 (default 1). */
  readonly weight?: number;
}

/** `COST n` and `DRYRUN`. */
export interface CostOptions {
  /** What the request takes (default 1; 0 never changes state). */
  readonly cost?: Count;
  /** Decide without changing anything. */
  readonly dryRun?: boolean;
}

/** The other kinds of charge: at most one of them. */
export interface ChargeOptions {
  /** Charge `cost` even when it does not fit (a debt later requests wait off). */
  readonly force?: boolean;
  /** Charge the most of `cost` that fits now (`Decision.granted`). */
  readonly partial?: boolean;
  /** Give `refund` units back (not with `cost`). */
  readonly refund?: Count;
}

/** The options of `RL.GCRA`, `RL.BUCKET`, `RL.SLIDING`, `RL.FIXED` and `RL.CHECK`. */
export interface DecideOptions extends NameOption, CostOptions, WaitOptions, ChargeOptions {}

/** The options of `RL.SKETCH` (it neither waits nor takes other charges). */
export interface SketchOptions extends NameOption, CostOptions {}

/** The options of `RL.ACQUIRE`. */
export interface AcquireOptions extends NameOption, CostOptions, WaitOptions {}

/** The options of `RL.SHARE`. */
export interface ShareOptions extends CostOptions, WaitOptions {}

/** The options of `RL.ALL`. */
export interface AllOptions extends CostOptions, WaitOptions, ChargeOptions {
  /** `COSTS c1 .. cN`: each limit's own cost (instead of `cost`). */
  readonly costs?: readonly Count[];
  /** `REFUND COSTS c1 .. cN`: each limit's own refund (instead of `refund`). */
  readonly refundCosts?: readonly Count[];
}

/** One limit of an `RL.ALL` call. */
export interface AllLimit {
  /** The limiter's key. */
  readonly key: string;
  /** Its limit. */
  readonly policy: Policy;
  /** Its name in the headers (default `"default"`). */
  readonly name?: string;
}

/** One node of an `RL.SHARE` path, leaf first, root last. */
export interface ShareNode {
  /** The node's key. */
  readonly key: string;
  /** The assured rate: `limit` per `period`. */
  readonly limit: Count;
  /** The period of both rates. */
  readonly period: Duration;
  /** The assured rate's burst (default `limit`). */
  readonly burst?: Count;
  /** The ceiling per `period`: every node but the root has one, the root none. */
  readonly ceil?: Count;
  /** Its name in the headers (default `"default"`). */
  readonly name?: string;
}

/** `CL.THROTTLE key max_burst count period [quantity]` (redis-cell). */
export interface ThrottleParams {
  /** Bursts of `maxBurst + 1`. */
  readonly maxBurst: Count;
  /** Requests per `periodSeconds`. */
  readonly count: Count;
  /** The period, in whole **seconds** (redis-cell's unit). */
  readonly periodSeconds: Count;
  /** Units taken (default 1; 0 peeks). */
  readonly quantity?: Count;
}

function optionWords(options: DecideOptions & AllOptions): string[] {
  const words: string[] = [];
  if (options.costs !== undefined) words.push("COSTS", ...options.costs.map(String));
  else if (options.cost !== undefined) words.push("COST", String(options.cost));
  if (options.dryRun === true) words.push("DRYRUN");
  if (options.wait !== undefined) {
    words.push("WAIT", durationArg(options.wait));
    if (options.flow !== undefined) words.push("FLOW", options.flow);
    if (options.weight !== undefined) words.push("WEIGHT", String(options.weight));
  }
  if (options.force === true) words.push("FORCE");
  if (options.partial === true) words.push("PARTIAL");
  if (options.refundCosts !== undefined) words.push("REFUND", "COSTS", ...options.refundCosts.map(String));
  else if (options.refund !== undefined) words.push("REFUND", String(options.refund));
  return words;
}

const COMMAND = { gcra: "RL.GCRA", bucket: "RL.BUCKET", sliding: "RL.SLIDING", fixed: "RL.FIXED" } as const;

/**
 * Typed calls for every decision command of the module, over node-redis,
 * ioredis or any `sendCommand` function. Each call is one command; a
 * server error rejects with a {@link ReplyError} that keeps the server's
 * message. Replies parse the same from RESP2 and RESP3.
 *
 * @example
 * ```ts
 * const limiter = new RateLimiter(client); // node-redis or ioredis
 * const d = await limiter.gcra("rl:user:42", { limit: 10, period: "1s" });
 * if (!d.allowed) res.set(d.headers()).status(429);
 * ```
 */
export class RateLimiter {
  /** The raw-command call every command goes through. */
  readonly sendCommand: SendCommand;

  /** A limiter sending its commands through `client`. */
  constructor(client: RedisLike) {
    this.sendCommand = toSendCommand(client);
  }

  /** Sends `args` (a command and its arguments) as they are, with this package's error types. */
  raw(args: string[]): Promise<RawReply> {
    return send(this.sendCommand, args);
  }

  private async single(command: string, key: string, args: string[], described: Described, options: DecideOptions): Promise<Decision> {
    const reply = await this.raw([command, key, ...args, ...optionWords(options)]);
    return parseDecision(reply, described, options.partial === true);
  }

  /** A decision under `policy` (GCRA, bucket, sliding or fixed), by its own command. */
  decide(key: string, policy: GcraPolicy | BucketPolicy | SlidingPolicy | FixedPolicy, options: DecideOptions = {}): Promise<Decision> {
    const described = { name: options.name ?? "default", quota: policyQuota(policy) };
    return this.single(COMMAND[policy.type], key, policyArgs(policy), described, options);
  }

  /** `RL.GCRA key limit period [BURST n]`: a sustained rate with bursts. */
  gcra(key: string, params: Omit<GcraPolicy, "type">, options?: DecideOptions): Promise<Decision> {
    return this.decide(key, { type: "gcra", ...params }, options);
  }

  /** `RL.BUCKET key capacity refill period`: a token bucket refilled continuously. */
  bucket(key: string, params: Omit<BucketPolicy, "type">, options?: DecideOptions): Promise<Decision> {
    return this.decide(key, { type: "bucket", ...params }, options);
  }

  /** `RL.SLIDING key limit window [EXACT | APPROX | BUCKETS n]`: a sliding window. */
  sliding(key: string, params: Omit<SlidingPolicy, "type">, options?: DecideOptions): Promise<Decision> {
    return this.decide(key, { type: "sliding", ...params }, options);
  }

  /** `RL.FIXED key limit window [ALIGNED]`: a count per fixed window. */
  fixed(key: string, params: Omit<FixedPolicy, "type">, options?: DecideOptions): Promise<Decision> {
    return this.decide(key, { type: "fixed", ...params }, options);
  }

  /**
   * `RL.SKETCH key item limit window [WIDTH w] [DEPTH d]`: the same limit
   * for every `item`, counted in one fixed-size sketch at `key`.
   */
  sketch(
    key: string,
    item: string,
    params: { readonly limit: Count; readonly window: Duration; readonly width?: number; readonly depth?: number },
    options: SketchOptions = {},
  ): Promise<Decision> {
    const args = [item, String(params.limit), durationArg(params.window)];
    if (params.width !== undefined) args.push("WIDTH", String(params.width));
    if (params.depth !== undefined) args.push("DEPTH", String(params.depth));
    const described = { name: options.name ?? "default", quota: rateQuota(params.limit, params.window) };
    return this.single("RL.SKETCH", key, args, described, options);
  }

  /** `RL.ALL`: several limits admitted all or nothing, in one atomic decision. */
  async all(limits: readonly AllLimit[], options: AllOptions = {}): Promise<AllDecision> {
    const args = ["RL.ALL", String(limits.length), ...limits.map((l) => l.key), ...limits.flatMap((l) => policyWords(l.policy))];
    const reply = await this.raw([...args, ...optionWords(options)]);
    const described = limits.map((l) => ({ name: l.name ?? "default", quota: policyQuota(l.policy) }));
    return parseAllDecision(reply, described, options.partial === true);
  }

  private shareArgs(command: string, path: readonly ShareNode[]): string[] {
    const nodes = path.flatMap((n) => [
      String(n.limit),
      durationArg(n.period),
      ...(n.burst === undefined ? [] : ["BURST", String(n.burst)]),
      ...(n.ceil === undefined ? [] : ["CEIL", String(n.ceil)]),
    ]);
    return [command, String(path.length), ...path.map((n) => n.key), ...nodes];
  }

  private static shareDescribed(path: readonly ShareNode[]): Described[] {
    return path.map((n) => ({ name: n.name ?? "default", quota: rateQuota(n.limit, n.period) }));
  }

  /** `RL.SHARE`: limits along a path (leaf first) that lend each other unused capacity. */
  async share(path: readonly ShareNode[], options: ShareOptions = {}): Promise<AllDecision> {
    const reply = await this.raw([...this.shareArgs("RL.SHARE", path), ...optionWords(options)]);
    return parseAllDecision(reply, RateLimiter.shareDescribed(path), false);
  }

  /** `RL.SHARE.PEEK`: what a request of one unit at the path's leaf would get now, changing nothing. */
  async sharePeek(path: readonly ShareNode[]): Promise<AllDecision> {
    const reply = await this.raw(this.shareArgs("RL.SHARE.PEEK", path));
    return parseAllDecision(reply, RateLimiter.shareDescribed(path), false);
  }

  /**
   * `RL.CHECK key name [OR name ...]`: a decision under the first of
   * `names` that is defined (named policies, the module loaded with
   * `policies on`). The reply is that policy's own command's.
   */
  check(key: string, names: readonly [string, ...string[]], options: DecideOptions = {}): Promise<Decision> {
    const chain = names.flatMap((n, i) => (i === 0 ? [n] : ["OR", n]));
    return this.single("RL.CHECK", key, chain, { name: options.name ?? "default", quota: undefined }, options);
  }

  /** `RL.PEEK key policy`: a read-only look at a limiter (one unit, now). */
  peek(key: string, policy: Policy, options: NameOption = {}): Promise<Decision> {
    return this.single("RL.PEEK", key, policyWords(policy), { name: options.name ?? "default", quota: policyQuota(policy) }, {});
  }

  /**
   * `RL.ACQUIRE key limit ttl`: a lease on one of `limit` slots, until
   * released or `ttl` passes. `Decision.lease` holds it (`null` when denied).
   * {@link withLease} releases and renews it for you.
   */
  acquire(key: string, params: Omit<ConcurrencyPolicy, "type">, options: AcquireOptions = {}): Promise<Decision> {
    const described = { name: options.name ?? "default", quota: undefined };
    return this.single("RL.ACQUIRE", key, [String(params.limit), durationArg(params.ttl)], described, options);
  }

  /** `RL.RELEASE key lease`: `true` if the lease was held, `false` if it had expired or was released. */
  async release(key: string, lease: string): Promise<boolean> {
    return parseInteger(await this.raw(["RL.RELEASE", key, lease])) === 1;
  }

  /** `RL.RENEW key lease ttl`: `true` and the lease now ends `ttl` from now, or `false` (it had ended). */
  async renew(key: string, lease: string, ttl: Duration): Promise<boolean> {
    return parseInteger(await this.raw(["RL.RENEW", key, lease, durationArg(ttl)])) === 1;
  }

  /**
   * `CL.THROTTLE` (redis-cell's command), as a {@link Decision}: `allowed`
   * is not `limited`, and its second fields (whole seconds, rounded up as
   * redis-cell does) are given in milliseconds.
   */
  async throttle(key: string, params: ThrottleParams, options: NameOption = {}): Promise<Decision> {
    const args = ["CL.THROTTLE", key, String(params.maxBurst), String(params.count), String(params.periodSeconds)];
    if (params.quantity !== undefined) args.push(String(params.quantity));
    const reply = await this.raw(args);
    if (!Array.isArray(reply) || reply.length !== 5) return parseDecision(reply, { name: "", quota: undefined }, false);
    const [limited, limit, remaining, retry, reset] = reply.map((v) => parseInteger(v));
    const quota = rateQuota(params.count, Number(params.periodSeconds) * 1000);
    return new Decision(
      {
        allowed: limited === 0,
        limit: limit ?? 0,
        remaining: remaining ?? 0,
        retryAfterMs: retry === undefined || retry < 0 ? null : retry * 1000,
        resetAfterMs: (reset ?? 0) * 1000,
      },
      { name: options.name ?? "default", quota },
    );
  }

  /** `RL.CLOCK`: the limiter's time, in microseconds since the Unix epoch. */
  async clock(): Promise<bigint> {
    return parseBigInteger(await this.raw(["RL.CLOCK"]));
  }
}
