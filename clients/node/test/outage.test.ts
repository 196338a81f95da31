// The server killed, or frozen (SIGSTOP), under closed-loop traffic: every
// decision answers within its deadline (the fallback), at once while the
// connection is known down; the first decision after the server is back
// comes within 1 s; and no command is sent after its caller gave up (the
// server's INFO commandstats, read after it is back).
import assert from "node:assert/strict";
import type { AddressInfo } from "node:net";
import { describe, test } from "node:test";
import express from "express";
import { rateLimit } from "express-rate-limit";
import { Redis } from "ioredis";
import { createClient } from "redis";
import { type Guard, RateLimiter, type RedisLike } from "redis-ratelimit";
import { RedisRateLimitStore } from "redis-ratelimit/express";
import { Ratelimit } from "redis-ratelimit/upstash";
import { Server, openNodeRedis } from "./harness.js";

const DEADLINE_MS = 100;
const IN_FLIGHT = 8;
const OUTAGE_MS = 1500;

/** One decision: whether the server answered it, and how it was fallen back on. */
type Outcome = "server" | "fallback";

interface Api {
  readonly name: string;
  /** The command each decision sends, as INFO commandstats names it. */
  readonly command: string;
  /** `ms`: the decision's time when it is not the call's own (the express app's, without the HTTP round trip). */
  setUp(redis: RedisLike): Promise<{ decide(key: string): Promise<Outcome | { outcome: Outcome; ms: number }>; guard: Guard; close(): Promise<void> }>;
}

const typed: Api = {
  name: "typed",
  command: "rl.gcra",
  async setUp(redis) {
    const rl = new RateLimiter(redis, { timeout: DEADLINE_MS, fallback: "open" });
    return {
      decide: async (key) => ((await rl.gcra(key, { limit: 1_000_000, period: "1s" })).fallback === undefined ? "server" : "fallback"),
      guard: rl.guard,
      close: async () => rl.close(),
    };
  },
};

const upstash: Api = {
  name: "upstash",
  command: "rl.sliding",
  async setUp(redis) {
    const ratelimit = new Ratelimit({ redis, limiter: Ratelimit.slidingWindow(1_000_000, "1 s"), timeout: DEADLINE_MS });
    return {
      decide: async (key) => ((await ratelimit.limit(key)).reason === undefined ? "server" : "fallback"),
      guard: ratelimit.guard,
      close: async () => ratelimit.close(),
    };
  },
};

const LIMIT = 1_000_000;
const store: Api = {
  name: "express",
  command: "rl.fixed",
  async setUp(redis) {
    const s = new RedisRateLimitStore({ client: redis, timeout: DEADLINE_MS, fallback: "open" });
    const app = express();
    // The decision's time in the app: from the request's arrival to the middleware's verdict.
    app.use((_req, res, next) => {
      res.locals.t0 = performance.now();
      next();
    });
    app.use(rateLimit({ windowMs: 60_000, limit: LIMIT, store: s, keyGenerator: (req) => String(req.query.k), standardHeaders: "draft-6", legacyHeaders: false }));
    app.get("/", (_, res) => void res.set("x-decision-ms", String(performance.now() - Number(res.locals.t0))).send("ok"));
    const http = app.listen(0, "127.0.0.1");
    await new Promise((r) => http.once("listening", r));
    const url = `http://127.0.0.1:${(http.address() as AddressInfo).port}/`;
    return {
      guard: s.guard,
      // Open fallback counts nothing: the remaining is then the whole limit.
      decide: async (key) => {
        const res = await fetch(`${url}?k=${key}`);
        const outcome = res.headers.get("ratelimit-remaining") === String(LIMIT) ? "fallback" : "server";
        return { outcome, ms: Number(res.headers.get("x-decision-ms")) };
      },
      close: async () => {
        s.shutdown();
        await new Promise((r) => http.close(r));
      },
    };
  },
};

interface Library {
  readonly name: string;
  open(url: string): Promise<{ redis: RedisLike; close(): void }>;
}

const LIBRARIES: readonly Library[] = [
  { name: "node-redis", open: openNodeRedis },
  {
    name: "ioredis",
    async open(url) {
      const c = new Redis(url, { lazyConnect: true, enableOfflineQueue: false, autoResendUnfulfilledCommands: false, retryStrategy: () => 100 });
      c.on("error", () => undefined);
      await c.connect();
      return { redis: c, close: () => c.disconnect() };
    },
  },
];

function p99(ms: number[]): number {
  const sorted = [...ms].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(sorted.length * 0.99) - 1)] ?? 0;
}

async function commandCalls(url: string, command: string): Promise<number> {
  const admin = createClient({ url });
  await admin.connect();
  try {
    const info = await admin.info("commandstats");
    const match = new RegExp(`cmdstat_${command.replace(".", "\\.")}:calls=(\\d+)`).exec(info);
    return Number(match?.[1] ?? 0);
  } finally {
    admin.destroy();
  }
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe("outage: server killed or frozen under closed-loop traffic", () => {
  for (const library of LIBRARIES) {
    for (const api of [typed, store, upstash]) {
      for (const outage of ["killed", "frozen"] as const) {
        test(`${library.name}, ${api.name}, server ${outage}`, async (t) => {
          const server = await Server.start({ manualClock: false });
          const client = await library.open(server.url);
          const limiter = await api.setUp(client.redis);
          let phase: "before" | "down" | "back" = "before";
          let backAt = 0;
          let firstBack = -1;
          const downMs: number[] = [];
          const count = { before: 0, down: 0, back: 0, timedOut: 0 };
          let running = true;
          const loops = Array.from({ length: IN_FLIGHT }, async (_, i) => {
            for (let n = 0; running; n++) {
              const started = performance.now();
              const at = phase;
              const answer = await limiter.decide(`k${i}`);
              const outcome = typeof answer === "string" ? answer : answer.outcome;
              const took = typeof answer === "string" ? performance.now() - started : answer.ms;
              if (at === "down" && phase === "down") downMs.push(took);
              if (outcome === "server") {
                count[phase]++;
                if (phase === "back" && firstBack < 0) firstBack = performance.now() - backAt;
              } else if (took >= DEADLINE_MS) count.timedOut++;
              if (phase === "down" || outcome === "fallback") await sleep(1);
            }
          });
          try {
            await sleep(300);
            const answeredBefore = count.before;
            phase = "down";
            if (outage === "killed") await server.kill();
            else server.pause();
            await sleep(OUTAGE_MS);
            const sentBeforeReturn = limiter.guard.sent;
            if (outage === "killed") await server.spawn();
            else server.resume();
            backAt = performance.now();
            phase = "back";
            for (let i = 0; i < 300 && firstBack < 0; i++) await sleep(10);
            await sleep(200);
            running = false;
            await Promise.all(loops);
            const calls = await commandCalls(server.url, api.command);
            // Killed: the new server counts from 0, so every call it ran must have been handed to the
            // client after it was back (a command handed over before, and run after, was sent late).
            // A late reply's give-back (a REFUND of the same command) is not a decision sent late.
            const givenBack = limiter.guard.givenBack + limiter.guard.givebackFailures;
            const executedLate = outage === "killed" ? calls - givenBack - (limiter.guard.sent - sentBeforeReturn) : calls - givenBack - answeredBefore - count.down - count.back;
            const row = {
              library: library.name,
              api: api.name,
              outage,
              deadline: DEADLINE_MS,
              decisionsDuringOutage: downMs.length,
              p99: Math.round(p99(downMs) * 10) / 10,
              max: Math.round(Math.max(...downMs) * 10) / 10,
              firstDecisionAfterReturnMs: Math.round(firstBack),
              timedOut: count.timedOut,
              executedLate,
              lateReplies: limiter.guard.lateReplies,
              givenBack,
            };
            t.diagnostic(JSON.stringify(row));
            assert.ok(downMs.length > IN_FLIGHT * 10, "decisions went on during the outage");
            assert.ok(row.p99 <= DEADLINE_MS + 20, `p99 ${row.p99} ms`);
            assert.ok(firstBack >= 0 && firstBack <= 1000, `first decision ${firstBack} ms after the server was back`);
            // A killed server's calls are all new; a frozen one runs, on waking, only the commands
            // written before their deadline (at most one per loop: the circuit opened at the first deadline).
            if (outage === "killed") assert.equal(executedLate, 0);
            else assert.ok(executedLate <= IN_FLIGHT, `${executedLate} executed late`);
          } finally {
            running = false;
            await Promise.all(loops);
            await limiter.close();
            client.close();
            await server.stop();
          }
        });
      }
    }
  }
});
