// @upstash/ratelimit's README, its one usage example ("Basic Usage", README.md of
// github.com/upstash/ratelimit-js at 5b5448a, March 2026), run with only the import
// (redis-ratelimit/upstash) and the Redis client (node-redis or ioredis, RESP2 and
// RESP3, instead of @upstash/redis's Redis.fromEnv()) changed. Its top-level
// `return`s are a request handler's, so the example is that handler. The README's
// other code blocks (the npm install line, a Deno CDN import, the contributors'
// `pnpm test`) are not usage: README.md's Upstash section says why each is not run.
// Then the deny-list example of Upstash's "Traffic Protection" page
// (upstash.com/docs/redis/sdks/ratelimit-ts/traffic-protection), the same way; the
// page's snippet lacks a comma after `enableProtection: true` and the `await` before
// `ratelimit.limit(...)`, both put back. The value is denied with the server's
// `RL.DENY <prefix>:<value>` where Upstash's dashboard adds it to its list.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { Ratelimit } from "redis-ratelimit/upstash";
import { RateLimiter } from "redis-ratelimit";
import { CLIENTS, Server } from "./harness.js";

const START_US = 1_767_225_600_000_000n;

let server: Server;
let protectedServer: Server;
before(async () => {
  server = await Server.start();
  protectedServer = await Server.start({ policies: true });
});
after(async () => {
  await server.stop();
  await protectedServer.stop();
});

for (const kind of CLIENTS) {
  test(`README "Basic Usage", ${kind.name}`, async () => {
    const open = await kind.open(server.url);
    const redis = open.redis;
    const admin = new RateLimiter(redis);
    try {
      await admin.raw(["FLUSHALL"]);
      await admin.raw(["RL.CLOCK", "SET", START_US.toString()]);
      let calculations = 0;
      const doExpensiveCalculation = (): void => {
        calculations++;
      };

      // ---- the example, as in their README but for the import and the client ----
      const ratelimit = new Ratelimit({
        redis,
        limiter: Ratelimit.slidingWindow(10, "10 s"),
        analytics: true,
        prefix: "@upstash/ratelimit",
      });
      const identifier = "api";
      const handler = async (): Promise<string> => {
        const { success } = await ratelimit.limit(identifier);

        if (!success) {
          return "Unable to process at this time";
        }
        doExpensiveCalculation();
        return "Here you go!";
      };
      // ---- end of the example ----

      const answers: string[] = [];
      for (let i = 0; i < 12; i++) answers.push(await handler());
      assert.deepEqual(answers, [...Array<string>(10).fill("Here you go!"), ...Array<string>(2).fill("Unable to process at this time")]);
      assert.equal(calculations, 10);
      // The server's state: one key, `<prefix>:<identifier>`, spent (getRemaining is an RL.PEEK).
      assert.deepEqual(await admin.raw(["KEYS", "*"]), ["@upstash/ratelimit:api"]);
      assert.equal((await ratelimit.getRemaining(identifier)).remaining, 0);

      // Two windows later on the server's clock, the identifier is admitted again (a new instance: the
      // first one's ephemeral cache holds the denial on this process's real clock, which RL.CLOCK does not move).
      ratelimit.close();
      await admin.raw(["RL.CLOCK", "SET", (START_US + 20_000_000n).toString()]);
      const later = new Ratelimit({ redis, limiter: Ratelimit.slidingWindow(10, "10 s"), prefix: "@upstash/ratelimit" });
      assert.equal((await later.limit(identifier)).success, true);
      later.close();
    } finally {
      await open.close();
    }
  });
}

for (const kind of CLIENTS) {
  test(`docs "Traffic Protection" (deny list), ${kind.name}`, async () => {
    const open = await kind.open(protectedServer.url);
    const redis = open.redis;
    const admin = new RateLimiter(redis);
    const printed: unknown[][] = [];
    const console = { log: (...values: unknown[]) => printed.push(values) };
    try {
      await admin.raw(["FLUSHALL"]);
      await admin.raw(["RL.CLOCK", "SET", START_US.toString()]);
      // The deny list is the server's, not a key (FLUSHALL keeps it): the earlier runs' entries go.
      for (const v of ["ip-address", "country", "user-agent", "userId"]) await admin.raw(["RL.UNDENY", `@upstash/ratelimit:${v}`]);
      // The operator's deny list: the IP address, for an hour.
      await admin.raw(["RL.DENY", "@upstash/ratelimit:ip-address", "1h", "REASON", "abuse"]);

      // ---- the example, as on their page but for the client (and the comma, the await) ----
      const ratelimit = new Ratelimit({
        redis,
        limiter: Ratelimit.slidingWindow(10, "10 s"),
        enableProtection: true,
        analytics: true,
      });
      const { success, pending, reason, deniedValue } = await ratelimit.limit("userId", {
        ip: "ip-address",
        userAgent: "user-agent",
        country: "country",
      });

      await pending; // await pending if you have analytics enabled

      console.log(success, reason, deniedValue);
      // prints: false, "denyList", "ip-address"
      // ---- end of the example ----

      assert.deepEqual(printed, [[false, "denyList", "ip-address"]]);
      // Nothing charged: the identifier's limit is whole.
      assert.equal((await ratelimit.getRemaining("userId")).remaining, 10);
      // Each kind of value is checked, the first denied one named; none denied: the limit decides.
      await admin.raw(["RL.DENY", "@upstash/ratelimit:country", "1h"]);
      const byCountry = await ratelimit.limit("userId", { userAgent: "user-agent", country: "country" });
      assert.deepEqual([byCountry.success, byCountry.reason, byCountry.deniedValue], [false, "denyList", "country"]);
      await admin.raw(["RL.DENY", "@upstash/ratelimit:user-agent", "1h"]);
      const byAgent = await ratelimit.limit("userId", { ip: "10.0.0.1", userAgent: "user-agent", country: "country" });
      assert.deepEqual([byAgent.success, byAgent.reason, byAgent.deniedValue], [false, "denyList", "user-agent"]);
      const clean = await ratelimit.limit("userId", { ip: "10.0.0.1", userAgent: "curl", country: "DE" });
      assert.deepEqual([clean.success, clean.reason, clean.remaining], [true, undefined, 9]);
      // The identifier itself denied: named before the other values.
      await admin.raw(["RL.DENY", "@upstash/ratelimit:userId", "1h"]);
      const byId = await ratelimit.limit("userId", { ip: "ip-address" });
      assert.deepEqual([byId.success, byId.reason, byId.deniedValue], [false, "denyList", "userId"]);
      assert.equal((await ratelimit.getRemaining("userId")).remaining, 9);
      ratelimit.close();
    } finally {
      await open.close();
    }
  });
}
