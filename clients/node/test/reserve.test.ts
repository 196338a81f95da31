// Reservations (`reserve`) and jittered waits (`jitter: true`) against a
// real server with the manual clock, in every client and protocol.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { type GcraPolicy, RateLimiter } from "redis-ratelimit";
import { CLIENTS, Server } from "./harness.js";

const START_US = "1767225600000000";
const ONE_PER_S: GcraPolicy = { type: "gcra", limit: 1, period: "1s" };

describe("reservations and jitter", () => {
  for (const kind of CLIENTS) {
    test(`reserve and jitter with ${kind.name}`, async () => {
      // A server of its own: herds live in its memory, so the waits below are exact.
      const server = await Server.start();
      const client = await kind.open(server.url);
      try {
        const rl = new RateLimiter(client.redis, { timeout: 10_000 });
        await rl.raw(["RL.CLOCK", "SET", START_US]);

        // Admitted now for a start 1 s later; then denied, charging nothing.
        assert.equal((await rl.decide("api:42", ONE_PER_S)).allowed, true);
        const r = await rl.reserve("api:42", ONE_PER_S, "5s");
        assert.deepEqual([r.decision.allowed, r.decision.resetAfterMs, r.delayMs], [true, 2000, 1000]);
        const denied = await rl.reserve("api:42", ONE_PER_S, "1500ms");
        assert.deepEqual([denied.decision.allowed, denied.decision.retryAfterMs, denied.delayMs], [false, 2000, null]);
        const dry = await rl.reserve("api:42", ONE_PER_S, "5s", { dryRun: true });
        assert.equal(dry.delayMs, 2000);
        assert.equal((await rl.decide("api:42", ONE_PER_S, { dryRun: true })).resetAfterMs, 2000);

        // A bucket admitting at once: no delay.
        const now = await rl.reserve("up:1", { type: "bucket", capacity: 5, refill: 1, period: "1s" }, 1000, { cost: 2 });
        assert.deepEqual([now.delayMs, now.decision.remaining], [0, 3]);

        // 50 in flight on one key: 5 at once, then one start each 100 ms up to the 1 s bound.
        const hot: GcraPolicy = { type: "gcra", limit: 10, period: "1s", burst: 5 };
        const got = await Promise.all(Array.from({ length: 50 }, () => rl.reserve("hot", hot, "1s")));
        const delays = got.flatMap((g) => (g.delayMs === null ? [] : [g.delayMs])).sort((a, b) => a - b);
        assert.deepEqual(delays, [0, 0, 0, 0, 0, 100, 200, 300, 400, 500, 600, 700, 800, 900, 1000]);
        assert.ok(got.every((g) => g.delayMs !== null || !g.decision.allowed));
        const state = await rl.decide("hot", hot, { dryRun: true });
        assert.deepEqual([state.remaining, state.resetAfterMs], [0, 1500]);

        // The server refuses RESERVE on a lease by name (the typed call only takes GCRA and buckets).
        const bad = await rl.raw(["RL.ACQUIRE", "w", "10", "1m", "RESERVE", "1s"]).catch((e: unknown) => e);
        assert.ok(bad instanceof Error);
        assert.equal(bad.message, "ERR syntax error: RESERVE cannot be combined with RL.ACQUIRE");

        // Jitter: never before the true wait (10 ms), the i-th denied in the i-th interval after it; exact under the manual clock.
        const api7: GcraPolicy = { type: "gcra", limit: 100, period: "1s" };
        await rl.decide("api:7", api7, { cost: 100 });
        assert.equal((await rl.decide("api:7", api7)).retryAfterMs, 10);
        const waits = [];
        for (let i = 0; i < 20; i++) waits.push((await rl.decide("api:7", api7, { jitter: true })).retryAfterMs);
        assert.deepEqual(waits.slice(0, 2), [18, 29]); // docs/commands.md's example
        waits.forEach((w, i) => assert.ok(w !== null && w >= 10 + 10 * i && w <= 10 + 10 * (i + 1), `wait ${i}: ${w}`));
        assert.ok(new Set(waits).size > 10);
        assert.equal((await rl.decide("api:7", api7, { dryRun: true })).resetAfterMs, 1000); // denials write nothing
      } finally {
        await client.close();
        await server.stop();
      }
    });
  }
});
