// The @upstash/ratelimit API on the module: limit(), blockUntilReady() by
// the server's WAIT, getRemaining(), resetUsedTokens(), the timeout.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { RateLimiter } from "redis-ratelimit";
import { Ratelimit, type RatelimitResponse } from "redis-ratelimit/upstash";
import { CLIENTS, type OpenClient, Server, nodeRedis, until } from "./harness.js";

/** `reset` is an epoch in ms: `ms` after the reply arrived, at this process's clock. */
function assertReset(r: RatelimitResponse, ms: number, before: number, after: number): void {
  assert.ok(r.reset >= before + ms && r.reset <= after + ms, `reset ${r.reset} not ${ms} ms after [${before}, ${after}]`);
}

const START_US = 1_699_920_000_000_000n;

describe("Ratelimit (the @upstash/ratelimit shape)", () => {
  let server: Server;
  before(async () => {
    server = await Server.start();
  });
  after(async () => server.stop());

  for (const kind of CLIENTS) {
    describe(kind.name, () => {
      let a: OpenClient;
      let b: OpenClient;
      before(async () => {
        [a, b] = [await kind.open(server.url), await kind.open(server.url)];
        // A day boundary: aligned windows start here.
        await new RateLimiter(a.redis).raw(["RL.CLOCK", "SET", String(START_US)]);
      });
      after(async () => {
        await a.close();
        await b.close();
      });
      const prefix = `up:${kind.name}`;

      test("slidingWindow: limit, remaining, reset, pending, rate", async () => {
        const ratelimit = new Ratelimit({ redis: a.redis, limiter: Ratelimit.slidingWindow(10, "10 s"), prefix });
        const t0 = Date.now();
        const first = await ratelimit.limit("sw");
        const t1 = Date.now();
        assert.deepEqual({ ...first, reset: 0, pending: null }, { success: true, limit: 10, remaining: 9, reset: 0, pending: null });
        assert.equal(await first.pending, undefined);
        assertReset(first, 20_000, t0, t1); // the two-window estimate is empty after two windows
        assert.equal((await ratelimit.limit("sw", { rate: 8 })).remaining, 1);
        const last = await ratelimit.limit("sw");
        assert.equal(last.success, true);
        const s0 = Date.now();
        const denied = await ratelimit.limit("sw");
        const s1 = Date.now();
        assert.equal(denied.success, false);
        assert.equal(denied.remaining, 0);
        assertReset(denied, 11_000, s0, s1); // one more fits once a tenth of the next window has passed
        assert.equal(String(await new RateLimiter(a.redis).raw(["EXISTS", `${prefix}:sw`])), "1");
      });

      test("fixedWindow and tokenBucket", async () => {
        const fixed = new Ratelimit({ redis: a.redis, limiter: Ratelimit.fixedWindow(3, "1m"), prefix });
        const got = [];
        for (let i = 0; i < 4; i++) got.push((await fixed.limit("fw")).success);
        assert.deepEqual(got, [true, true, true, false]);
        const bucket = new Ratelimit({ redis: a.redis, limiter: Ratelimit.tokenBucket(5, "1 s", 10), prefix });
        const taken = [];
        for (let i = 0; i < 10; i++) taken.push(await bucket.limit("tb"));
        // The denial's reset runs from the server's reply; the next call is
        // answered from the ephemeral cache with that same reset.
        const t0 = Date.now();
        taken.push(await bucket.limit("tb"));
        assert.equal(taken.filter((r) => r.success).length, 10);
        assert.equal(taken[10]?.limit, 10);
        const late = await bucket.limit("tb");
        assertReset(late, 200, t0, Date.now());
      });

      test("blockUntilReady: one command waiting on the server until the clock admits it", async () => {
        const limiter = Ratelimit.slidingWindow(2, "1 s");
        const ratelimit = new Ratelimit({ redis: a.redis, limiter, prefix });
        const waiting = new Ratelimit({ redis: b.redis, limiter, prefix });
        await ratelimit.limit("block", { rate: 2 });
        const rl = new RateLimiter(a.redis);
        await rl.raw(["CONFIG", "RESETSTAT"]);
        const ready = waiting.blockUntilReady("block", 5000);
        await until(async () => /ratelimit_waiting:1\r?\n/.test(String(await rl.raw(["INFO", "ratelimit"]))), "the waiter is queued");
        await rl.raw(["RL.CLOCK", "ADVANCE", "2000000"]);
        const r = await ready;
        assert.equal(r.success, true);
        const stats = String(await rl.raw(["INFO", "commandstats"]));
        assert.match(stats, /cmdstat_rl\.sliding:calls=1,/);
        // A wait longer than the timeout: denied at once, not after polling.
        await ratelimit.limit("block2", { rate: 2 });
        const t0 = Date.now();
        const no = await waiting.blockUntilReady("block2", 100);
        assert.equal(no.success, false);
        assertReset(no, 1500, t0, Date.now());
        await assert.rejects(waiting.blockUntilReady("block", 0), /timeout must be positive/);
      });

      test("getRemaining and resetUsedTokens", async () => {
        const ratelimit = new Ratelimit({ redis: a.redis, limiter: Ratelimit.fixedWindow(5, "1 h"), prefix });
        assert.deepEqual(await ratelimit.getRemaining("gr").then((r) => ({ ...r, reset: 0 })), { remaining: 5, reset: 0, limit: 5 });
        await ratelimit.limit("gr", { rate: 3 });
        const left = await ratelimit.getRemaining("gr");
        assert.equal(left.remaining, 2);
        assert.equal(left.limit, 5);
        assert.ok(left.reset > Date.now());
        await ratelimit.resetUsedTokens("gr");
        assert.equal((await ratelimit.getRemaining("gr")).remaining, 5);
      });
    });
  }

  test("50 limit() calls in flight on one identifier: exactly the limit succeed", async () => {
    const c = await nodeRedis(3).open(server.url);
    try {
      const ratelimit = new Ratelimit({ redis: c.redis, limiter: Ratelimit.slidingWindow(10, "1 m"), prefix: "flight" });
      const all = await Promise.all(Array.from({ length: 50 }, () => ratelimit.limit("one")));
      assert.equal(all.filter((r) => r.success).length, 10);
    } finally {
      await c.close();
    }
  });

  test("Redis not answering: after `timeout` ms the request passes with reason 'timeout'", async () => {
    const own = await Server.start();
    const c = await nodeRedis(2).open(own.url);
    try {
      const ratelimit = new Ratelimit({ redis: c.redis, limiter: Ratelimit.slidingWindow(1, "1 m"), timeout: 50, ephemeralCache: false });
      assert.equal((await ratelimit.limit("x")).success, true);
      assert.equal((await ratelimit.limit("x")).success, false);
      await own.kill();
      const r = await ratelimit.limit("x");
      assert.deepEqual({ ...r, pending: null }, { success: true, limit: 1, remaining: 0, reset: 0, pending: null, reason: "timeout" });
    } finally {
      await c.close();
      await own.stop();
    }
  });
});
