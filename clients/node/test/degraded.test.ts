// Degraded mode: three processes (each its own connection and limiter) at
// uneven rates on one key; the server frozen (SIGSTOP) for 10 s. Each
// admits its observed share of the limit locally, within ±20 %. Real clock:
// degraded mode runs on each process's clock while the server is away, and
// the traffic is paced open-loop arrivals (the shape is the test's input).
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { RateLimiter } from "redis-ratelimit";
import { CLIENTS, Server } from "./harness.js";

const POLICY = { type: "gcra", limit: 100, period: "1s" } as const;
const RATE = 100; // a second
const DEMAND = [40, 120, 240]; // requests a second per process
const WARM_MS = 5000;
const OUTAGE_MS = 10_000;

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, Math.max(0, ms)));

describe("degraded mode: 3 processes at uneven rates, the server frozen 10 s", () => {
  for (const kind of [CLIENTS[0], CLIENTS[2]]) {
    if (kind === undefined) continue;
    test(kind.name, async (t) => {
      const server = await Server.start({ manualClock: false });
      const opened = await Promise.all(DEMAND.map(() => kind.open(server.url)));
      const limiters = opened.map((o) => new RateLimiter(o.redis, { timeout: 300, fallback: "closed", degraded: 100 }));
      let phase: "warm" | "down" | "back" = "warm";
      const admittedDown = DEMAND.map(() => 0);
      const offeredDown = DEMAND.map(() => 0);
      let running = true;
      const pending = new Set<Promise<void>>();
      try {
        // Paced open-loop arrivals: request n of process i is sent at n / DEMAND[i] s.
        const start = performance.now();
        const loops = limiters.map(async (rl, i) => {
          const period = 1000 / (DEMAND[i] ?? 1);
          for (let n = 0; running; n++) {
            await sleep(start + n * period - performance.now());
            const at = phase;
            const p = rl.decide("shared", POLICY).then((d) => {
              if (at === "down" && phase === "down") {
                offeredDown[i] = (offeredDown[i] ?? 0) + 1;
                if (d.allowed) admittedDown[i] = (admittedDown[i] ?? 0) + 1;
              }
            });
            pending.add(p);
            void p.finally(() => pending.delete(p));
          }
        });
        await sleep(WARM_MS);
        const shares = limiters.map((rl) => rl.degradedShare("shared", POLICY) ?? 0);
        phase = "down";
        server.pause();
        const downAt = performance.now();
        await sleep(OUTAGE_MS);
        phase = "back";
        const seconds = (performance.now() - downAt) / 1000;
        server.resume();
        running = false;
        await Promise.all(loops);
        await Promise.all([...pending]);
        const expected = shares.map((s, i) => Math.min((DEMAND[i] ?? 0) * seconds, s * RATE * seconds));
        const ratio = admittedDown.map((a, i) => a / (expected[i] ?? 1));
        t.diagnostic(JSON.stringify({ demand: DEMAND, shares: shares.map((s) => Number(s.toFixed(3))), seconds: Number(seconds.toFixed(2)), offeredDown, admittedDown, expected: expected.map(Math.round), ratio: ratio.map((r) => Number(r.toFixed(3))) }));
        for (const [i, r] of ratio.entries()) assert.ok(r >= 0.8 && r <= 1.2, `process ${i}: ${admittedDown[i]} admitted, ${expected[i]} expected`);
        const total = admittedDown.reduce((a, b) => a + b, 0);
        assert.ok(total <= RATE * seconds * 1.2 + 100, `${total} admitted in all`);
      } finally {
        running = false;
        server.resume();
        for (const rl of limiters) rl.close();
        await Promise.all(opened.map((o) => o.close()));
        await server.stop();
      }
    });
  }
});
