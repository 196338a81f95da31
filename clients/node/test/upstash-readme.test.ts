// @upstash/ratelimit's README, its one usage example ("Basic Usage", README.md of
// github.com/upstash/ratelimit-js at 5b5448a, March 2026), run with only the import
// (redis-ratelimit/upstash) and the Redis client (node-redis or ioredis, RESP2 and
// RESP3, instead of @upstash/redis's Redis.fromEnv()) changed. Its top-level
// `return`s are a request handler's, so the example is that handler. The README's
// other code blocks (the npm install line, a Deno CDN import, the contributors'
// `pnpm test`) are not usage: README.md's Upstash section says why each is not run.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { Ratelimit } from "redis-ratelimit/upstash";
import { RateLimiter } from "redis-ratelimit";
import { CLIENTS, Server } from "./harness.js";

const START_US = 1_767_225_600_000_000n;

let server: Server;
before(async () => {
  server = await Server.start();
});
after(async () => server.stop());

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
