// What a user moving from rate-limit-redis or @upstash/ratelimit hit:
// each case failed before its fix.
import assert from "node:assert/strict";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import express from "express";
import { rateLimit } from "express-rate-limit";
import { RedisStore } from "rate-limit-redis";
import { RateLimiter } from "redis-ratelimit";
import { RedisRateLimitStore } from "redis-ratelimit/express";
import { Ratelimit } from "redis-ratelimit/upstash";
import { type OpenClient, Server, nodeRedis } from "./harness.js";

async function statuses(store: RedisStore | RedisRateLimitStore, n: number): Promise<number[]> {
  const app = express();
  app.use(rateLimit({ windowMs: 60_000, limit: 2, store, standardHeaders: "draft-8", legacyHeaders: false }));
  app.get("/", (_req, res) => void res.send("ok"));
  const http = app.listen(0, "127.0.0.1");
  await new Promise((r) => http.once("listening", r));
  const url = `http://127.0.0.1:${(http.address() as AddressInfo).port}/`;
  try {
    const out = [];
    for (let i = 0; i < n; i++) out.push((await fetch(url)).status);
    return out;
  } finally {
    http.closeAllConnections();
    await new Promise((r) => http.close(r));
  }
}

describe("defects users hit", () => {
  let server: Server;
  let client: OpenClient;
  before(async () => {
    server = await Server.start();
    client = await nodeRedis(2).open(server.url);
  });
  after(async () => {
    await client.close();
    await server.stop();
  });

  test("moving from rate-limit-redis by changing the class name: no WRONGTYPE (the default prefixes differ)", async () => {
    const redis = client.redis as { sendCommand(args: string[]): Promise<unknown> };
    const sendCommand = (...args: string[]): Promise<never> => redis.sendCommand(args) as Promise<never>;
    // The same client address, the same windowMs: before, then after the move.
    assert.deepEqual(await statuses(new RedisStore({ sendCommand }), 3), [200, 200, 429]);
    assert.deepEqual(await statuses(new RedisRateLimitStore({ sendCommand }), 3), [200, 200, 429]);
  });

  test("Ratelimit windows in decimals, as @upstash/ratelimit takes them", async () => {
    const ratelimit = new Ratelimit({ redis: client.redis, limiter: Ratelimit.slidingWindow(10, "1.5 s"), prefix: "dec" });
    assert.equal((await ratelimit.limit("a")).remaining, 9);
    const bucket = new Ratelimit({ redis: client.redis, limiter: Ratelimit.tokenBucket(1, "0.5 m", 2), prefix: "dec" });
    assert.equal((await bucket.limit("b")).remaining, 1);
    assert.throws(() => Ratelimit.fixedWindow(1, "1.0005 s"), /whole number of milliseconds/);
    const rl = new RateLimiter(client.redis);
    assert.equal((await rl.gcra("dec:g", { limit: 2, period: "1.5s" })).remaining, 1);
  });

  test("JSON.stringify of a decision", async () => {
    const rl = new RateLimiter(client.redis);
    const d = await rl.gcra("json", { limit: 4, period: "1s" });
    const parsed = JSON.parse(JSON.stringify(d)) as { allowed: boolean; described: { quota: { q: number; w: number } } };
    assert.equal(parsed.allowed, true);
    assert.deepEqual(parsed.described.quota, { q: 4, w: 1 });
    const all = await rl.all([{ key: "json2", policy: { type: "gcra", limit: 4, period: "1s" } }]);
    assert.equal((JSON.parse(JSON.stringify(all)) as { allowed: boolean }).allowed, true);
  });
});
