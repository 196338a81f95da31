import { type RawReply, type RedisLike, type SendCommand, toSendCommand } from "./client.js";
import { AllDecision, Decision, type Described, type Reservation } from "./decision.js";
import { type Duration, durationArg, durationMillis } from "./duration.js";
import { DenyCache } from "./deny-cache.js";
import { DegradedShares } from "./degraded.js";
import { UnavailableError } from "./errors.js";
import { type CallOptions, DEFAULT_TIMEOUT_MS, Guard, type Undo, toTransport } from "./guard.js";
import { DEFAULT_MAX_WAITERS, WaitPool } from "./pool.js";
import { parseAllDecision, parseBigInteger, parseDecision, parseInteger, parseReservation } from "./reply.js";
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

/**
 * What a decision answers when the server does not (its deadline passed,
 * or the connection is known down): `"closed"` denies (`retryAfterMs`
 * 1000, so `Retry-After: 1`), `"open"` admits, `"error"` rejects with the
 * {@link UnavailableError}. The decision says which in `fallback`.
 */
export type Fallback = "closed" | "open" | "error";

/** How a {@link RateLimiter} is set up. */
export interface LimiterOptions {
  /** Each call's deadline in ms (default 300, as the Rust and Python clients), a command's own `wait` on top. */
  readonly timeout?: number;
  /** The answer when there is none from the server (default `"closed"`). */
  readonly fallback?: Fallback;
  /** The most commands waiting on the server (`wait`) at once, each on a connection of its own (default 64). */
  readonly maxWaiters?: number;
  /**
   * Remember up to this many denials (keys × limits) and deny again
   * locally until their `retryAfterMs` has passed (default 0: off). See
   * {@link DenyCache}.
   */
  readonly denyCache?: number;
  /**
   * Degraded mode for up to this many keys (default 0: off): while the
   * server does not answer, a fail-closed (`"closed"`) decision is made
   * locally at this process's share of the key's limit, estimated from the
   * server's replies. See {@link DegradedShares}.
   */
  readonly degraded?: number;
}

/** Options every call takes. */
export interface NameOption extends CallOptions {
  /** The limit's name in {@link Decision.headers} (default `"default"`). */
  readonly name?: string;
  /** This call's answer when the server gives none (default: the limiter's). */
  readonly fallback?: Fallback;
}

/** `WAIT timeout [FLOW name [WEIGHT w]]`: wait on the server to be admitted instead of being denied. */
export interface WaitOptions {
  /**
   * Wait up to this long, first come first served, instead of being
   * denied. The command is sent on a connection of its own, from a pool
   * opened with the client's `duplicate()`, so that other calls are never
   * queued behind it (a `sendCommand` function has no `duplicate()`: give
   * it a connection of its own). The call's deadline is `timeout` + `wait`.
   */
  readonly wait?: Duration;
  /** With `wait`: the flow (tenant) this waiter belongs to; flows share the key's admissions by weight. */
  readonly flow?: string;
  /** With `flow`: its weight, 1 to 1000 (default 1). */
  readonly weight?: number;
}

/** `COST n`, `DRYRUN` and `JITTER`. */
export interface CostOptions {
  /** What the request takes (default 1; 0 never changes state). */
  readonly cost?: Count;
  /** Decide without changing anything. */
  readonly dryRun?: boolean;
  /**
   * `JITTER`: a denial's `retryAfterMs` is spread over the time the key
   * needs to admit the clients it denied together (never before the true
   * wait), so they do not all come back at once. Always sent to the
   * server (the deny cache would answer the unspread wait).
   */
  readonly jitter?: boolean;
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
export interface ShareOptions extends CostOptions, WaitOptions, CallOptions {
  /** This call's answer when the server gives none (default: the limiter's). */
  readonly fallback?: Fallback;
}

/** The options of `RL.ALL`. */
export interface AllOptions extends CostOptions, WaitOptions, ChargeOptions, CallOptions {
  /** This call's answer when the server gives none (default: the limiter's). */
  readonly fallback?: Fallback;
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
  /** Units taken (default 1; 0 peeks; a negative quantity gives back). */
  readonly quantity?: Count;
}

function optionWords(options: DecideOptions & AllOptions): string[] {
  const words: string[] = [];
  if (options.costs !== undefined) words.push("COSTS", ...options.costs.map(String));
  else if (options.cost !== undefined) words.push("COST", String(options.cost));
  if (options.dryRun === true) words.push("DRYRUN");
  if (options.jitter === true) words.push("JITTER");
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

/** The ms one unit of a paced limit takes to come back (GCRA, bucket); `undefined` for windows. */
function unitInterval(policy: GcraPolicy | BucketPolicy | SlidingPolicy | FixedPolicy): number | undefined {
  if (policy.type === "gcra" || policy.type === "bucket") {
    const ms = durationMillis(policy.period);
    const units = Number(policy.type === "gcra" ? policy.limit : policy.refill);
    return ms === undefined || !(units > 0) ? undefined : Number(ms) / units;
  }
  return undefined;
}

/** Commands whose charge `REFUND n` gives back. */
const REFUNDABLE = new Set(["RL.GCRA", "RL.BUCKET", "RL.SLIDING", "RL.FIXED", "RL.CHECK"]);

/** What a reply of `command` took, as the units to refund (0: nothing), for the charge `options` asked. */
function charged(d: Decision, options: DecideOptions): bigint {
  if (options.dryRun === true || options.refund !== undefined) return 0n;
  if (options.force === true) return BigInt(options.cost ?? 1);
  if (!d.allowed) return 0n;
  return options.partial === true ? BigInt(d.granted ?? 0) : BigInt(options.cost ?? 1);
}

/**
 * The give-back of a single decision whose caller stopped waiting: a
 * refund of what it was charged (`args` being the command, its key and
 * policy words), or the release of the lease it got; `undefined` for the
 * commands that take none (`RL.SKETCH`, `RL.PEEK`).
 */
function singleUndo(args: readonly string[], described: Described, options: DecideOptions): Undo | undefined {
  const [command = "", key = ""] = args;
  if (command === "RL.ACQUIRE") {
    return (reply) => {
      const lease = parseDecision(reply, described, false).lease;
      return lease === null || lease === undefined ? undefined : ["RL.RELEASE", key, lease];
    };
  }
  if (!REFUNDABLE.has(command)) return undefined;
  return (reply) => {
    const units = charged(parseDecision(reply, described, options.partial === true), options);
    return units > 0n ? [...args, "REFUND", String(units)] : undefined;
  };
}

/**
 * The give-back of a `CL.THROTTLE` whose caller stopped waiting: the same
 * limit (`args`, up to its period) with the quantity negated, sent when the
 * late reply says it was admitted (`limited` 0); `undefined` for a peek
 * (0), a give-back (negative) or a quantity the server refuses.
 */
function throttleUndo(args: readonly string[], quantity: Count): Undo | undefined {
  if (typeof quantity === "number" && !Number.isSafeInteger(quantity)) return undefined;
  const units = BigInt(quantity);
  if (units <= 0n) return undefined;
  return (reply) => {
    const limited = Array.isArray(reply) && reply.length === 5 ? reply[0] : undefined;
    return limited !== undefined && parseInteger(limited) === 0 ? [...args, String(-units)] : undefined;
  };
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
  /** The client's raw-command call (without deadline). */
  readonly sendCommand: SendCommand;
  /** The deadlines and circuit every call goes through. */
  readonly guard: Guard;
  private readonly waits: WaitPool;
  private readonly fallback: Fallback;
  /** The limiter's fallback (`"closed"` unless set). */
  get defaultFallback(): Fallback {
    return this.fallback;
  }
  private readonly denials: DenyCache | undefined;
  /** Degraded mode's shares, when on. */
  readonly degraded: DegradedShares | undefined;
  /** A lately denied slot's request at the server: the others on it wait for its answer, then look again. */
  private readonly asking = new Map<string, Promise<unknown>>();

  /** A limiter sending its commands through `client`. */
  constructor(client: RedisLike, options: LimiterOptions = {}) {
    this.sendCommand = toSendCommand(client);
    this.guard = new Guard(toTransport(client), options.timeout ?? DEFAULT_TIMEOUT_MS);
    this.waits = new WaitPool(client, this.guard, options.maxWaiters ?? DEFAULT_MAX_WAITERS);
    this.fallback = options.fallback ?? "closed";
    this.denials = options.denyCache === undefined || options.denyCache === 0 ? undefined : new DenyCache(options.denyCache);
    this.degraded = options.degraded === undefined || options.degraded === 0 ? undefined : new DegradedShares(options.degraded);
  }

  /**
   * Sends `args` (a command and its arguments) as they are, with this
   * package's error types, within the deadline: no answer rejects with
   * {@link UnavailableError}.
   */
  raw(args: string[], options: CallOptions = {}): Promise<RawReply> {
    return this.guard.call(args, options);
  }

  /** Closes the connections of waiting commands (the client itself is the caller's) and stops probing. */
  close(): void {
    this.waits.close();
    this.guard.close();
  }

  /**
   * Sends a decision command: on the wait pool when it waits (a wait given
   * up on closes its connection: the server drops the waiter), else through
   * the guard, which gives back with `undo` what a reply nobody waited for took.
   */
  private decisionReply(args: string[], options: WaitOptions & CallOptions, undo?: Undo): Promise<RawReply> {
    if (options.wait === undefined) return this.guard.call(args, options, 0, undo);
    const waitMs = Number(durationMillis(options.wait) ?? 0n);
    return this.waits.call(args, options, waitMs);
  }

  /** The decision answered for `error` by `fallback`, or `error` thrown. */
  private fallbackDecision(error: unknown, described: Described, fallback: Fallback): Decision {
    if (!(error instanceof UnavailableError) || fallback === "error") throw error;
    const open = fallback === "open";
    return new Decision(
      { allowed: open, limit: 0, remaining: 0, retryAfterMs: open ? null : 1000, resetAfterMs: 0, fallback: error.reason },
      described,
    );
  }

  private async single(command: string, key: string, args: string[], described: Described, options: DecideOptions): Promise<Decision> {
    let reply: RawReply;
    try {
      const base = [command, key, ...args];
      reply = await this.decisionReply([...base, ...optionWords(options)], options, singleUndo(base, described, options));
    } catch (error) {
      return this.fallbackDecision(error, described, options.fallback ?? this.fallback);
    }
    return parseDecision(reply, described, options.partial === true);
  }

  private async several(args: string[], described: Described[], options: AllOptions | ShareOptions, partial: boolean, undo?: Undo): Promise<AllDecision> {
    let reply: RawReply;
    try {
      reply = await this.decisionReply(args, options, undo);
    } catch (error) {
      const limits = described.map((d) => this.fallbackDecision(error, d, options.fallback ?? this.fallback));
      const allowed = limits.every((d) => d.allowed);
      return new AllDecision(allowed, allowed ? null : 0, allowed ? null : 1000, limits);
    }
    return parseAllDecision(reply, described, partial);
  }

  /**
   * A decision under `policy` (GCRA, bucket, sliding or fixed), by its own
   * command; with `degraded` on, a fail-closed plain request the server
   * does not answer is decided at this process's share.
   */
  async decide(key: string, policy: GcraPolicy | BucketPolicy | SlidingPolicy | FixedPolicy, options: DecideOptions = {}): Promise<Decision> {
    // The second tier sees plain requests only: no wait, dry run or other kind of charge.
    const plain = options.wait === undefined && options.dryRun !== true && options.force !== true && options.partial !== true && options.refund === undefined && options.jitter !== true;
    const shares = plain && (options.fallback ?? this.fallback) === "closed" ? this.degraded : undefined;
    const d = await this.decideFirst(key, policy, options, plain);
    if (shares === undefined || d.cached === true) return d;
    const slot = [COMMAND[policy.type], key, ...policyArgs(policy)].join("\0");
    const cost = Number(options.cost ?? 1);
    if (d.fallback !== undefined) return shares.decide(slot, cost, d);
    shares.observe(slot, policy, d, cost);
    return d;
  }

  /**
   * A leased limit's queued block ({@link LeasedLimit}'s `queue`): `COST
   * units WAIT waitMs`, on a connection of the wait pool, within the
   * limiter's timeout plus `waitMs`. Given up on (its deadline) after it was
   * written, it keeps its place in the server's line and what its late
   * reply took is refunded. No answer: `fallback`'s decision.
   */
  async queuedBlock(key: string, policy: GcraPolicy | BucketPolicy | SlidingPolicy | FixedPolicy, units: number, waitMs: number, name: string, fallback: Fallback): Promise<Decision> {
    const described = { name, quota: policyQuota(policy) };
    const base = [COMMAND[policy.type], key, ...policyArgs(policy)];
    const options: DecideOptions = { cost: units };
    let reply: RawReply;
    try {
      reply = await this.waits.call([...base, "COST", String(units), "WAIT", durationArg(Math.max(1, Math.ceil(waitMs)))], {}, waitMs, singleUndo(base, described, options));
    } catch (error) {
      return this.fallbackDecision(error, described, fallback);
    }
    return parseDecision(reply, described, false);
  }

  /** Degraded mode's share of `key` under `policy` for this process (0 to 1), `undefined` when off or never answered. */
  degradedShare(key: string, policy: GcraPolicy | BucketPolicy | SlidingPolicy | FixedPolicy): number | undefined {
    return this.degraded?.share([COMMAND[policy.type], key, ...policyArgs(policy)].join("\0"));
  }

  /** {@link decide} without degraded mode: the deny cache, then the server. */
  private async decideFirst(key: string, policy: GcraPolicy | BucketPolicy | SlidingPolicy | FixedPolicy, options: DecideOptions, plain: boolean): Promise<Decision> {
    const described = { name: options.name ?? "default", quota: policyQuota(policy) };
    const args = policyArgs(policy);
    const command = COMMAND[policy.type];
    const cache = plain ? this.denials : undefined;
    if (cache === undefined) return this.single(command, key, args, described, options);
    const slot = [command, key, ...args].join("\0");
    const cost = Number(options.cost ?? 1);
    for (;;) {
      const local = cache.check(slot, cost);
      if (local !== undefined) return local;
      const ahead = this.asking.get(slot);
      if (ahead === undefined || !cache.recent(slot)) break;
      // One request at a time on a key denied lately (bounded by each call's own deadline).
      await ahead;
    }
    const asked = this.single(command, key, args, described, options).then((d) => {
      cache.observe(slot, cost, d, unitInterval(policy));
      return d;
    });
    const settled = asked.then(
      () => undefined,
      () => undefined,
    );
    this.asking.set(slot, settled);
    try {
      return await asked;
    } finally {
      if (this.asking.get(slot) === settled) this.asking.delete(slot);
    }
  }

  /**
   * `RESERVE maxDelay`: admitted now if the request would be admitted
   * within `maxDelay`, charged now, its admission starting after
   * `delayMs` (0: at once; rounded up, never early): wait that long, then
   * go, without asking again. Beyond `maxDelay` it is denied as without
   * it (`delayMs` `null`, nothing charged). GCRA and bucket policies (the
   * server refuses the others by name); a fallback's admission starts at once.
   */
  async reserve(key: string, policy: GcraPolicy | BucketPolicy, maxDelay: Duration, options: DecideOptions = {}): Promise<Reservation> {
    const described = { name: options.name ?? "default", quota: policyQuota(policy) };
    const base = [COMMAND[policy.type], key, ...policyArgs(policy)];
    const args = [...base, ...optionWords(options), "RESERVE", durationArg(maxDelay)];
    let reply: RawReply;
    try {
      const undo: Undo = (late) => {
        const units = charged(parseReservation(late, described).decision, options);
        return units > 0n ? [...base, "REFUND", String(units)] : undefined;
      };
      reply = await this.decisionReply(args, options, undo);
    } catch (error) {
      const decision = this.fallbackDecision(error, described, options.fallback ?? this.fallback);
      return { decision, delayMs: decision.allowed ? 0 : null };
    }
    return parseReservation(reply, described);
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
    const described = limits.map((l) => ({ name: l.name ?? "default", quota: policyQuota(l.policy) }));
    const partial = options.partial === true;
    const undo: Undo | undefined =
      options.dryRun === true || options.refund !== undefined || options.refundCosts !== undefined || limits.some((l) => l.policy.type === "concurrency")
        ? undefined
        : (reply) => {
            const d = parseAllDecision(reply, described, partial);
            if (!d.allowed && options.force !== true) return undefined;
            const costs = partial ? d.limits.map((l) => String(l.granted ?? 0)) : limits.map((_, i) => String(options.costs?.[i] ?? options.cost ?? 1));
            return costs.every((c) => c === "0") ? undefined : [...args, "REFUND", "COSTS", ...costs];
          };
    return this.several([...args, ...optionWords(options)], described, options, partial, undo);
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
    return this.several([...this.shareArgs("RL.SHARE", path), ...optionWords(options)], RateLimiter.shareDescribed(path), options, false);
  }

  /** `RL.SHARE.PEEK`: what a request of one unit at the path's leaf would get now, changing nothing. */
  async sharePeek(path: readonly ShareNode[], options: CallOptions = {}): Promise<AllDecision> {
    const reply = await this.raw(this.shareArgs("RL.SHARE.PEEK", path), options);
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
    return this.single("RL.PEEK", key, policyWords(policy), { name: options.name ?? "default", quota: policyQuota(policy) }, options);
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
  async release(key: string, lease: string, options: CallOptions = {}): Promise<boolean> {
    return parseInteger(await this.raw(["RL.RELEASE", key, lease], options)) === 1;
  }

  /** `RL.RENEW key lease ttl`: `true` and the lease now ends `ttl` from now, or `false` (it had ended). */
  async renew(key: string, lease: string, ttl: Duration, options: CallOptions = {}): Promise<boolean> {
    return parseInteger(await this.raw(["RL.RENEW", key, lease, durationArg(ttl)], options)) === 1;
  }

  /**
   * `CL.THROTTLE` (redis-cell's command), as a {@link Decision}: `allowed`
   * is not `limited`, and its second fields (whole seconds, rounded up as
   * redis-cell does) are given in milliseconds. A call whose caller stopped
   * waiting is given back, when its late reply says it was admitted, with
   * the same call's quantity negated.
   */
  async throttle(key: string, params: ThrottleParams, options: NameOption = {}): Promise<Decision> {
    const base = ["CL.THROTTLE", key, String(params.maxBurst), String(params.count), String(params.periodSeconds)];
    const args = params.quantity === undefined ? base : [...base, String(params.quantity)];
    const reply = await this.guard.call(args, options, 0, throttleUndo(base, params.quantity ?? 1));
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
  async clock(options: CallOptions = {}): Promise<bigint> {
    return parseBigInteger(await this.raw(["RL.CLOCK"], options));
  }
}
