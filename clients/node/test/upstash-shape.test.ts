// The rest of @upstash/ratelimit's shape: deny lists (enableProtection over
// the server's RL.DENY list), dynamic limits (over a named policy),
// cachedFixedWindow, the reason values, analytics over the server's own
// counts, MultiRegionRatelimit refused; and the rest of the API a user of
// @upstash/ratelimit calls (written here; their README's own example runs in
// upstash-readme.test.ts). A real server with `policies on` (the deny list
// and named policies live there).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { MultiRegionRatelimit, Ratelimit } from "redis-ratelimit/upstash";
import { RateLimiter } from "redis-ratelimit";
import { CLIENTS, type OpenClient, Server } from "./harness.js";

describe("Ratelimit: deny lists, dynamic limits, cachedFixedWindow, multi-region", () => {
  let server: Server;
  before(async () => {
    server = await Server.start({ policies: true });
  });
  after(async () => server.stop());

  for (const kind of CLIENTS) {
    describe(kind.name, () => {
      let client: OpenClient;
      let raw: RateLimiter;
      before(async () => {
        client = await kind.open(server.url);
        raw = new RateLimiter(client.redis);
        await raw.raw(["RL.CLOCK", "SET", "1767225600000000"]);
      });
      after(async () => client.close());
      const prefix = `shape:${kind.name}`;

      test("enableProtection: an identifier on the server's deny list is denied with reason denyList", async () => {
        const protectedLimit = new Ratelimit({ redis: client.redis, limiter: Ratelimit.slidingWindow(10, "10 s"), prefix, enableProtection: true, ephemeralCache: false });
        const plain = new Ratelimit({ redis: client.redis, limiter: Ratelimit.slidingWindow(10, "10 s"), prefix });
        await raw.raw(["RL.DENY", `${prefix}:mallory`, "1h", "REASON", "abuse"]);
        const denied = await protectedLimit.limit("mallory");
        assert.equal(denied.success, false);
        assert.equal(denied.reason, "denyList");
        assert.equal(denied.deniedValue, "mallory");
        // Without enableProtection the server still denies, without saying why.
        const unsaid = await plain.limit("mallory");
        assert.equal(unsaid.success, false);
        assert.notEqual(unsaid.reason, "denyList");
        const fine = await protectedLimit.limit("alice");
        assert.equal(fine.success, true);
        assert.equal(fine.reason, undefined);
        // Taken off the list: admitted again (the ephemeral cache, on, would deny until the time the denial had left).
        await raw.raw(["RL.UNDENY", `${prefix}:mallory`]);
        assert.equal((await protectedLimit.limit("mallory")).success, true);
      });

      test("dynamicLimits: setDynamicLimit changes the limit for every instance, false goes back", async () => {
        const a = new Ratelimit({ redis: client.redis, limiter: Ratelimit.fixedWindow(5, "1h"), prefix, dynamicLimits: true, ephemeralCache: false });
        const b = new Ratelimit({ redis: client.redis, limiter: Ratelimit.fixedWindow(5, "1h"), prefix, dynamicLimits: true, ephemeralCache: false });
        assert.deepEqual(await a.getDynamicLimit(), { dynamicLimit: null });
        await a.setDynamicLimit({ limit: 2 });
        assert.deepEqual(await b.getDynamicLimit(), { dynamicLimit: 2 });
        const got = [];
        for (let i = 0; i < 3; i++) got.push((await b.limit("dyn")).success);
        assert.deepEqual(got, [true, true, false]);
        await a.setDynamicLimit({ limit: false });
        assert.deepEqual(await b.getDynamicLimit(), { dynamicLimit: null });
        const back = [];
        for (let i = 0; i < 3; i++) back.push((await b.limit("dyn")).success);
        assert.deepEqual(back, [true, true, true]); // 5 per hour again: 2 used
        const off = new Ratelimit({ redis: client.redis, limiter: Ratelimit.fixedWindow(5, "1h"), prefix });
        await assert.rejects(off.setDynamicLimit({ limit: 1 }), /dynamicLimits is not enabled/);
      });

      test("cachedFixedWindow: a fixed window whose denials are answered locally (reason cacheBlock)", async () => {
        const ratelimit = new Ratelimit({ redis: client.redis, limiter: Ratelimit.cachedFixedWindow(1, "1h"), prefix });
        assert.equal((await ratelimit.limit("cfw")).success, true);
        const first = await ratelimit.limit("cfw");
        assert.deepEqual([first.success, first.reason], [false, undefined]);
        const cached = await ratelimit.limit("cfw");
        assert.deepEqual([cached.success, cached.reason], [false, "cacheBlock"]);
      });

      test("analytics: the server's own counts", async () => {
        const ratelimit = new Ratelimit({ redis: client.redis, limiter: Ratelimit.slidingWindow(10, "10 s"), prefix, analytics: true });
        await ratelimit.limit("an");
        assert.match(await ratelimit.analytics(), /ratelimit/);
      });
    });
  }

  test("MultiRegionRatelimit is refused at construction, saying why", () => {
    assert.throws(() => new MultiRegionRatelimit({}), /MultiRegionRatelimit is not offered: .* one server/);
  });

  // The calls a user of @upstash/ratelimit makes beyond limit(): pending, rate, blockUntilReady,
  // timeout, an ephemeral cache, getRemaining, resetUsedTokens.
  for (const kind of CLIENTS) {
    test(`the rest of the Ratelimit API, ${kind.name}`, async () => {
      const open = await kind.open(server.url);
      const redis = open.redis;
      try {
        await new RateLimiter(redis).raw(["FLUSHALL"]);
        // 10 per 10 s on one identifier: the 11th is refused (the README's handler around this call is
        // upstash-readme.test.ts)
        const ratelimit = new Ratelimit({ redis, limiter: Ratelimit.slidingWindow(10, "10 s"), analytics: true, prefix: "@upstash/ratelimit" });
        const identifier = "api";
        const successes: boolean[] = [];
        for (let i = 0; i < 11; i++) successes.push((await ratelimit.limit(identifier)).success);
        assert.deepEqual(successes, [...Array<boolean>(10).fill(true), false]);

        // pending: the background work to wait for (waitUntil on the edge)
        const { success, pending } = await ratelimit.limit("edge");
        await pending;
        assert.equal(success, true);

        // Several tokens at once
        const batch = new Ratelimit({ redis, limiter: Ratelimit.slidingWindow(100, "10 s") });
        assert.equal((await batch.limit("batch", { rate: 10 })).remaining, 90);

        // Wait for a request to pass, up to 30 s
        const blocking = new Ratelimit({ redis, limiter: Ratelimit.tokenBucket(5, "10 s", 10) });
        const ready = await blocking.blockUntilReady("block", 30_000);
        assert.equal(ready.success, true);

        // Timeout: let the request through when Redis does not answer within 1 s
        const withTimeout = new Ratelimit({ redis, limiter: Ratelimit.fixedWindow(10, "10 s"), timeout: 1000 });
        assert.equal((await withTimeout.limit("t")).success, true);

        // An ephemeral cache, created outside the handler
        const cache = new Map<string, number>();
        const cached = new Ratelimit({ redis, limiter: Ratelimit.slidingWindow(1, "10 s"), ephemeralCache: cache });
        assert.equal((await cached.limit("c")).success, true);
        assert.equal((await cached.limit("c")).success, false);
        assert.equal((await cached.limit("c")).reason, "cacheBlock");

        // getRemaining and resetUsedTokens
        assert.equal((await ratelimit.getRemaining(identifier)).remaining, 0);
        await ratelimit.resetUsedTokens(identifier);
        assert.equal((await ratelimit.getRemaining(identifier)).remaining, 10);
        for (const r of [ratelimit, batch, blocking, withTimeout, cached]) r.close();
      } finally {
        await open.close();
      }
    });
  }
});
