// The conformance scenarios shared by every client
// (conformance/scenarios.json), through the typed calls and their header
// fields, with both client libraries, against a real server on the manual
// clock.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, describe, test } from "node:test";
import { type AllDecision, type Decision, LeasedLimit, type Policy, RateLimiter, UnavailableError } from "redis-ratelimit";
import { CLIENTS, type OpenClient, Server } from "./harness.js";

interface Limit {
  readonly key: string;
  readonly policy: string;
  readonly name: string;
}

/** A `throttle` step's `CL.THROTTLE` (`quantity` default 1). */
interface ThrottleStep {
  readonly key: string;
  readonly max_burst: number;
  readonly count: number;
  readonly period_s: number;
  readonly quantity?: number;
}

interface Step {
  readonly clock_ms?: number;
  readonly clock_us?: number;
  readonly decide?: readonly Limit[];
  readonly cost?: number;
  readonly times?: number;
  readonly freeze?: boolean;
  readonly resume?: boolean;
  readonly deadline_ms?: number;
  readonly until_served_ms?: number;
  readonly peek?: { readonly key: string; readonly policy?: string; readonly throttle?: Omit<ThrottleStep, "key" | "quantity"> };
  readonly throttle?: ThrottleStep;
  readonly release?: boolean;
  readonly take?: { readonly key: string; readonly policy: string; readonly cost: number };
  readonly within_ms?: number;
  readonly expect?: {
    readonly server_commands?: number;
    readonly unavailable?: boolean;
    readonly within_ms?: number;
    readonly allowed?: boolean;
    readonly fallback?: boolean;
    readonly remaining?: number;
    readonly retry_after_ms?: number | null;
    readonly retry_after_ms_between?: readonly [number, number];
    readonly headers?: Readonly<Record<string, string | null>>;
    readonly violated?: readonly string[];
  };
}

interface Scenario {
  readonly name: string;
  readonly client?: {
    readonly deny_cache?: boolean;
    readonly lease_block?: number;
    readonly fallback?: "open" | "closed" | "degraded";
    readonly deadline_ms?: number;
  };
  readonly steps: readonly Step[];
}

const here = dirname(fileURLToPath(import.meta.url));
const file = JSON.parse(readFileSync(resolve(here, "../../../../conformance/scenarios.json"), "utf8")) as {
  scenarios: Scenario[];
};

const UNIT_MS: Readonly<Record<string, number>> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** A duration word of the module's (`60s`, `250ms`, a bare number of seconds) in milliseconds. */
function millis(word: string | undefined): number {
  const m = /^(\d+)(ms|s|m|h|d)?$/.exec(word ?? "");
  if (m === null) throw new Error(`bad duration '${word}'`);
  return Number(m[1]) * (UNIT_MS[m[2] ?? "s"] ?? 1000);
}

/** A policy from the module's words, as the typed policies say it. */
function policy(text: string): Exclude<Policy, { type: "concurrency" | "policy" }> {
  const [kind, a = "", b, c, d] = text.split(/\s+/);
  const upper = c?.toUpperCase();
  switch (kind?.toUpperCase()) {
    case "GCRA":
      return upper === "BURST" ? { type: "gcra", limit: Number(a), period: millis(b), burst: Number(d) } : { type: "gcra", limit: Number(a), period: millis(b) };
    case "BUCKET":
      return { type: "bucket", capacity: Number(a), refill: Number(b), period: millis(c) };
    case "FIXED":
      return { type: "fixed", limit: Number(a), window: millis(b), aligned: upper === "ALIGNED" };
    case "SLIDING": {
      const mode = upper === "APPROX" ? "approx" : upper === "BUCKETS" ? { buckets: Number(d) } : "exact";
      return { type: "sliding", limit: Number(a), window: millis(b), mode };
    }
    default:
      throw new Error(`no typed policy for '${text}'`);
  }
}

/** The second tier a scenario's limiter is built with, and its leases by key and policy. */
interface Tier {
  readonly leaseBlock?: number;
  readonly leases: Map<string, LeasedLimit>;
}

/** One `CL.THROTTLE` through the typed call. */
function throttle(rl: RateLimiter, t: ThrottleStep, timeout: number): Promise<Decision> {
  return rl.throttle(t.key, { maxBurst: t.max_burst, count: t.count, periodSeconds: t.period_s, quantity: t.quantity ?? 1 }, { timeout });
}

async function decide(rl: RateLimiter, step: Step, tier: Tier): Promise<{ d: Decision | AllDecision; remaining?: number }> {
  const limits = step.decide ?? [];
  const cost = step.cost ?? 1;
  const timeout = step.deadline_ms ?? rl.guard.timeoutMs;
  if (step.throttle !== undefined) {
    const d = await throttle(rl, step.throttle, timeout);
    return { d, remaining: d.remaining };
  }
  const [only] = limits;
  if (limits.length === 1 && only !== undefined && tier.leaseBlock !== undefined) {
    const id = `${only.key}\0${only.policy}`;
    let lease = tier.leases.get(id);
    if (lease === undefined) {
      lease = new LeasedLimit(rl, only.key, policy(only.policy), { block: tier.leaseBlock, name: only.name });
      tier.leases.set(id, lease);
    }
    const d = await lease.acquire({ cost, timeout });
    return { d, remaining: d.remaining };
  }
  if (limits.length === 1 && only !== undefined) {
    const d = await rl.decide(only.key, policy(only.policy), { name: only.name, cost, timeout });
    return { d, remaining: d.remaining };
  }
  const d = await rl.all(
    limits.map((l) => ({ key: l.key, policy: policy(l.policy), name: l.name })),
    { costs: limits.map(() => cost), timeout },
  );
  return { d };
}

/** Whether the limiter's fallback answered rather than the server (for `all`, any of its limits). */
function fellBack(d: Decision | AllDecision): boolean {
  return "limits" in d ? d.limits.some((l) => l.fallback !== undefined) : d.fallback !== undefined;
}

function differences(answer: { d: Decision | AllDecision; remaining?: number }, step: Step): string[] {
  const want = step.expect ?? {};
  const out: string[] = [];
  const { d } = answer;
  if (want.allowed !== undefined && d.allowed !== want.allowed) out.push(`allowed ${d.allowed} (expected ${want.allowed})`);
  if (want.remaining !== undefined && answer.remaining !== undefined && answer.remaining !== want.remaining)
    out.push(`remaining ${answer.remaining} (expected ${want.remaining})`);
  if (want.fallback !== undefined && fellBack(d) !== want.fallback) out.push(`fallback ${fellBack(d)} (expected ${want.fallback})`);
  if (want.retry_after_ms !== undefined && d.retryAfterMs !== want.retry_after_ms)
    out.push(`retry_after_ms ${d.retryAfterMs} (expected ${want.retry_after_ms})`);
  if (want.retry_after_ms_between !== undefined) {
    const [lo, hi] = want.retry_after_ms_between;
    if (d.retryAfterMs === null || d.retryAfterMs < lo || d.retryAfterMs > hi) out.push(`retry_after_ms ${d.retryAfterMs} (expected from ${lo} to ${hi})`);
  }
  const fields = Object.fromEntries(Object.entries(d.headers()).map(([k, v]) => [k.toLowerCase(), v as string | undefined]));
  for (const [name, value] of Object.entries(want.headers ?? {})) {
    const got = fields[name.toLowerCase()] ?? null;
    if (got !== value) out.push(`header ${name}: ${JSON.stringify(got)} (expected ${JSON.stringify(value)})`);
  }
  if (want.violated !== undefined) {
    const limits: readonly Decision[] = "limits" in d ? d.limits : [d];
    const violated = limits.filter((l) => !l.allowed).map((l) => l.described.name);
    if (JSON.stringify(violated) !== JSON.stringify(want.violated)) out.push(`violated ${JSON.stringify(violated)} (expected ${JSON.stringify(want.violated)})`);
  }
  return out;
}

/** One decide step: repeated `times`, or until the server decides (`until_served_ms`). */
async function runStep(rl: RateLimiter, step: Step, tier: Tier): Promise<string[]> {
  const want = step.expect ?? {};
  const out: string[] = [];
  for (let n = 0; n < (step.times ?? 1); n++) {
    const start = performance.now();
    const until = start + (step.until_served_ms ?? 0);
    let answer: Awaited<ReturnType<typeof decide>> | UnavailableError;
    for (;;) {
      try {
        answer = await decide(rl, step, tier);
      } catch (e) {
        if (!(e instanceof UnavailableError)) throw e;
        answer = e;
      }
      const served = !(answer instanceof UnavailableError) && !fellBack(answer.d);
      if (served || performance.now() >= until) break;
      await new Promise((r) => setTimeout(r, 5)); // polling a state, bounded by until_served_ms
    }
    const took = performance.now() - start;
    if (want.within_ms !== undefined && took > want.within_ms) out.push(`answered after ${took.toFixed(1)} ms (expected within ${want.within_ms})`);
    if (answer instanceof UnavailableError) {
      if (want.unavailable !== true) out.push(`unavailable: ${answer.message}`);
    } else if (want.unavailable === true) {
      out.push("decided (expected: the store unavailable)");
    } else {
      out.push(...differences(answer, step));
    }
  }
  return out;
}

/** A `peek` step: the key's `remaining` on the server, read again until it matches for at most `within_ms`. */
async function peekStep(rl: RateLimiter, step: Step): Promise<string[]> {
  const { key = "", policy: text = "", throttle: t } = step.peek ?? {};
  // Built once, sent on every poll; a throttle's state is read with quantity 0, which takes nothing.
  let read: () => Promise<Decision>;
  if (t === undefined) {
    const p = policy(text);
    read = () => rl.peek(key, p, { timeout: 1000 });
  } else {
    const call = { ...t, key, quantity: 0 };
    read = () => throttle(rl, call, 1000);
  }
  const want = step.expect?.remaining;
  const until = performance.now() + (step.within_ms ?? 0);
  let last: string;
  for (;;) {
    try {
      const d = await read();
      if (want === undefined || d.remaining === want) return [];
      last = `remaining ${d.remaining} (expected ${want})`;
    } catch (e) {
      if (!(e instanceof UnavailableError)) throw e;
      last = `unavailable: ${e.message}`;
    }
    if (performance.now() >= until) return [`peek ${key}: ${last}`];
    await new Promise((r) => setTimeout(r, 5)); // polling a state, bounded by within_ms
  }
}

/** `RL.*` commands other than `RL.CLOCK` and `RL.PEEK` the server ran since `CONFIG RESETSTAT`. */
async function serverCommands(rl: RateLimiter): Promise<number> {
  const info = await rl.raw(["INFO", "commandstats"]);
  const text = typeof info === "string" ? info : Buffer.from(info as Uint8Array).toString("utf8");
  let calls = 0;
  for (const m of text.matchAll(/^cmdstat_(rl\.[a-z.]+):calls=(\d+)/gim)) {
    const name = (m[1] ?? "").toLowerCase();
    if (name !== "rl.clock" && name !== "rl.peek") calls += Number(m[2]);
  }
  return calls;
}

for (const kind of CLIENTS) {
  describe(`conformance scenarios, ${kind.name}`, () => {
    let server: Server;
    let open: OpenClient;
    before(async () => {
      server = await Server.start();
      open = await kind.open(server.url);
    });
    after(async () => {
      await open.close();
      await server.stop();
    });

    for (const scenario of file.scenarios) {
      test(scenario.name, async () => {
        const tier2 = scenario.client ?? {};
        // Degraded mode is the fail-closed fallback with the local shares on.
        const fallback = tier2.fallback === undefined ? "error" : tier2.fallback === "open" ? "open" : "closed";
        const rl = new RateLimiter(open.redis, {
          fallback,
          timeout: tier2.deadline_ms ?? 10_000,
          ...(tier2.deny_cache === true ? { denyCache: 1000 } : {}),
          ...(tier2.fallback === "degraded" ? { degraded: 1000 } : {}),
        });
        const tier: Tier = { ...(scenario.client?.lease_block === undefined ? {} : { leaseBlock: scenario.client.lease_block }), leases: new Map() };
        await rl.raw(["FLUSHALL"]);
        await rl.raw(["CONFIG", "RESETSTAT"]);
        const failed: string[] = [];
        try {
          for (const [i, step] of scenario.steps.entries()) {
            const at = (x: string): string => `step ${i}: ${x}`;
            if (step.clock_ms !== undefined) await rl.raw(["RL.CLOCK", "SET", String(step.clock_ms * 1000)]);
            if (step.clock_us !== undefined) await rl.raw(["RL.CLOCK", "SET", String(step.clock_us)]);
            if (step.freeze === true) server.pause();
            if (step.resume === true) server.resume();
            if (step.release === true) for (const lease of tier.leases.values()) assert.equal(await lease.release(), true, at("release"));
            if (step.take !== undefined) {
              // Another process's charge, on the connection but not through the limiter.
              const { key, policy: text, cost } = step.take;
              const [kind = "", ...words] = text.split(/\s+/);
              const reply = await rl.raw([`RL.${kind.toUpperCase()}`, key, ...words, "COST", String(cost)]);
              // RESP2 `[allowed, ...]`; RESP3 a map (node-redis) or its flat pairs (ioredis).
              const flat: unknown[] | undefined = Array.isArray(reply) ? reply : undefined;
              const allowed = flat === undefined ? (reply as Record<string, unknown>)["allowed"] : flat[0] === "allowed" ? flat[1] : flat[0];
              if (Number(allowed) !== 1) failed.push(at(`take ${cost} on ${key}: ${JSON.stringify(reply)}`));
            }
            if (step.decide !== undefined || step.throttle !== undefined) failed.push(...(await runStep(rl, step, tier)).map(at));
            if (step.peek !== undefined) failed.push(...(await peekStep(rl, step)).map(at));
            const want = step.expect?.server_commands;
            if (want !== undefined) {
              const got = await serverCommands(rl);
              if (got !== want) failed.push(at(`server_commands ${got} (expected ${want})`));
            }
          }
        } finally {
          server.resume(); // never leave the shared server frozen
        }
        assert.deepEqual(failed, []);
      });
    }
  });
}
