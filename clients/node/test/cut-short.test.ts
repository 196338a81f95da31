// Callers that give up at random points (AbortSignal, deadlines) under
// concurrency, with the server frozen mid-run: every charge a caller did not
// get an answer for is given back when its late reply lands, so the
// server's state (RL.PEEK; CL.THROTTLE's quantity-0 peek) ends at exactly
// what the callers were told was admitted. And with the server killed while calls were out, none of them
// is run by the server that replaces it (node-redis drops them, this
// package takes them out of ioredis's resend queue).
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { Redis } from "ioredis";
import { RateLimiter, type RedisLike, UnavailableError } from "redis-ratelimit";
import { CLIENTS, Server, openNodeRedis } from "./harness.js";

// One unit takes 36 s to come back: the key never expires (on real time) during the test.
const LIMIT = 100_000;
const POLICY = { type: "gcra", limit: LIMIT, period: "1000h" } as const;
// CL.THROTTLE's same limit: LIMIT at once, one unit back every 36 s.
const THROTTLE = { maxBurst: LIMIT - 1, count: LIMIT, periodSeconds: 3_600_000 } as const;
const LOOPS = 16;
const CALLS = 60;

/** mulberry32: the fixed seed makes the abort points the same every run. */
function prng(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** An AbortSignal that aborts at a random point: at once, after I/O, or 0–3 ms later. */
function randomAbort(random: () => number): AbortSignal {
  const controller = new AbortController();
  const r = random();
  if (r < 0.1) queueMicrotask(() => { controller.abort(new Error("gave up")); });
  else if (r < 0.3) setImmediate(() => { controller.abort(new Error("gave up")); });
  else if (r < 0.8) setTimeout(() => { controller.abort(new Error("gave up")); }, Math.floor(random() * 4));
  // else: never aborted, only the deadline
  return controller.signal;
}

describe("calls cut short at random points", () => {
  for (const kind of CLIENTS) {
    test(`${kind.name}: the server ends at what was admitted, with the server frozen mid-run`, async (t) => {
      const server = await Server.start();
      const open = await kind.open(server.url);
      const rl = new RateLimiter(open.redis, { timeout: 40, fallback: "closed" });
      const random = prng(42);
      let started = 0;
      let frozen = false;
      let thawed = false;
      const admitted = { a: 0, b: 0, t: 0 };
      const count = { aborted: 0, fallback: 0, denied: 0, throttles: 0, throttlesCut: 0 };
      try {
        await rl.raw(["RL.CLOCK", "SET", "1767225600000000"]);
        const loops = Array.from({ length: LOOPS }, async () => {
          for (let n = 0; n < CALLS; n++) {
            const i = started++;
            // Frozen after a third of the calls started, thawed after two thirds: the calls in
            // flight then are written and answered only once the server wakes.
            if (i === Math.floor((LOOPS * CALLS) / 3)) {
              server.pause();
              frozen = true;
            }
            if (frozen && !thawed && i >= Math.floor((2 * LOOPS * CALLS) / 3)) {
              server.resume();
              thawed = true;
            }
            const signal = randomAbort(random);
            const r = random();
            const both = r < 0.3;
            // A third CL.THROTTLE on a key of its own, quantities 1 to 3.
            const quantity = r >= 2 / 3 ? 1 + (n % 3) : 0;
            if (quantity > 0) count.throttles++;
            try {
              if (quantity > 0) {
                try {
                  const d = await rl.throttle("t", { ...THROTTLE, quantity }, { signal });
                  if (d.allowed) admitted.t += quantity;
                  else count.denied++;
                } catch (error) {
                  if (!(error instanceof UnavailableError)) throw error;
                  count.fallback++;
                  count.throttlesCut++;
                }
              } else if (both) {
                const d = await rl.all([{ key: "a", policy: POLICY }, { key: "b", policy: POLICY }], { signal });
                if (d.allowed && d.limits.every((l) => l.fallback === undefined)) {
                  admitted.a++;
                  admitted.b++;
                } else if (d.limits.some((l) => l.fallback !== undefined)) count.fallback++;
                else count.denied++;
              } else {
                const d = await rl.decide("a", POLICY, { signal });
                if (d.fallback !== undefined) count.fallback++;
                else if (d.allowed) admitted.a++;
                else count.denied++;
              }
            } catch (error) {
              assert.equal((error as Error).message, "gave up");
              count.aborted++;
              if (quantity > 0) count.throttlesCut++;
            }
            await new Promise((r) => setImmediate(r));
            // Thawed: wait for the probe to close the circuit (polling a state, bounded), so the
            // last third runs against a server that answers again.
            for (let w = 0; thawed && rl.guard.open && w < 200; w++) await new Promise((r) => setTimeout(r, 5));
          }
        });
        await Promise.all(loops);
        server.resume();
        // Polling a state, bounded: the give-backs of the replies that land late.
        const peek = async (key: string): Promise<number> => (await rl.peek(key, POLICY, { timeout: 1000 })).remaining;
        const peekThrottle = async (): Promise<number> => (await rl.throttle("t", { ...THROTTLE, quantity: 0 }, { timeout: 1000 })).remaining;
        const expected = { a: LIMIT - admitted.a, b: LIMIT - admitted.b, t: LIMIT - admitted.t };
        let remaining = { a: -1, b: -1, t: -1 };
        for (let i = 0; i < 400; i++) {
          try {
            remaining = { a: await peek("a"), b: await peek("b"), t: await peekThrottle() };
            if (remaining.a === expected.a && remaining.b === expected.b && remaining.t === expected.t) break;
          } catch {
            // the circuit still open: the next look
          }
          await new Promise((r) => setTimeout(r, 10));
        }
        const lost = { a: expected.a - remaining.a, b: expected.b - remaining.b, t: expected.t - remaining.t };
        t.diagnostic(JSON.stringify({ admitted, ...count, lateReplies: rl.guard.lateReplies, givenBack: rl.guard.givenBack, remaining, lost }));
        assert.ok(count.aborted > 30, "many calls were cut short");
        assert.ok(rl.guard.lateReplies > 0 && rl.guard.givenBack > 0, "some replies landed late and were given back");
        assert.equal(rl.guard.givebackFailures, 0);
        assert.equal(count.denied, 0);
        assert.ok(count.throttlesCut > 10, "many CL.THROTTLE calls were cut short");
        assert.deepEqual(remaining, expected);
      } finally {
        server.resume();
        rl.close();
        await open.close();
        await server.stop();
      }
    });
  }

  // The client libraries as users create them (ioredis's defaults resend, after a reconnection, the
  // commands written before the connection dropped).
  const defaults: readonly { name: string; open(url: string): Promise<{ redis: RedisLike; close(): void }> }[] = [
    { name: "node-redis", open: openNodeRedis },
    {
      name: "ioredis (default options)",
      async open(url) {
        const c = new Redis(url, { lazyConnect: true, retryStrategy: () => 20 });
        c.on("error", () => undefined);
        await c.connect();
        return { redis: c, close: () => { c.disconnect(); } };
      },
    },
  ];
  for (const lib of defaults) {
    test(`${lib.name}: calls cut short while the server was frozen are not run by the server that replaces it`, async () => {
      const server = await Server.start();
      const client = await lib.open(server.url);
      const rl = new RateLimiter(client.redis, { timeout: 30, fallback: "closed" });
      try {
        server.pause();
        // Written to the frozen server, then given up on by their deadline or their signal.
        const calls = Array.from({ length: 20 }, (_, i) => {
          const controller = new AbortController();
          if (i % 2 === 0) setTimeout(() => { controller.abort(new Error("gave up")); }, 5);
          return rl.decide("k", POLICY, { signal: controller.signal }).catch(() => undefined);
        });
        await Promise.all(calls);
        await server.kill();
        await server.spawn();
        const sentBefore = rl.guard.sent;
        // The first decision the new server answers comes after anything resent on reconnection.
        let served = false;
        for (let i = 0; i < 300 && !served; i++) {
          served = (await rl.decide("k", POLICY)).fallback === undefined;
          if (!served) await new Promise((r) => setTimeout(r, 10)); // polling a state, bounded
        }
        assert.ok(served, "the new server decides");
        // The new server ran only decisions handed over after it was back (one handed over as the old
        // connection closed never arrives): none resent, so none given back.
        const info = String(await rl.raw(["INFO", "commandstats"]));
        const ran = Number(/cmdstat_rl\.gcra:calls=(\d+)/.exec(info)?.[1] ?? 0);
        assert.ok(ran >= 1 && ran <= rl.guard.sent - sentBefore, `${ran} RL.GCRA run, ${rl.guard.sent - sentBefore} handed over since the return`);
        assert.equal(rl.guard.lateReplies, 0);
        assert.equal((await rl.peek("k", POLICY)).remaining, LIMIT - 1, "only the one decision after the return was charged");
      } finally {
        server.resume();
        rl.close();
        client.close();
        await server.stop();
      }
    });
  }
});
