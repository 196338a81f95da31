// The deny cache at 10x the offered load on one key: a denied key is
// answered locally until its retry_after (paced for GCRA: one command per
// admission), never admitting more than the server does.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { RateLimiter } from "redis-ratelimit";
import { Ratelimit } from "redis-ratelimit/upstash";
import { Server, nodeRedis } from "./harness.js";

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function calls(rl: RateLimiter, command: string): Promise<number> {
  const info = String(await rl.raw(["INFO", "commandstats"]));
  return Number(new RegExp(`cmdstat_${command.replace(".", "\\.")}:calls=(\\d+)`).exec(info)?.[1] ?? 0);
}

describe("deny cache", () => {
  test("10x offered load on one key: at most 0.12 commands per request, admissions within the limit", async (t) => {
    const server = await Server.start({ manualClock: false });
    const client = await nodeRedis(2).open(server.url);
    const rl = new RateLimiter(client.redis, { denyCache: 1000 });
    try {
      // 50 per second, offered about 10x that by 12 closed loops for 2 s.
      const policy = { limit: 50, period: "1s" as const, burst: 5 };
      let requests = 0;
      let admitted = 0;
      let local = 0;
      const started = performance.now();
      await Promise.all(
        Array.from({ length: 12 }, async () => {
          while (performance.now() - started < 2000) {
            const d = await rl.gcra("hot", policy);
            requests++;
            if (d.allowed) admitted++;
            if (d.cached === true) local++;
            await sleep(20);
          }
        }),
      );
      const seconds = (performance.now() - started) / 1000;
      const commands = await calls(rl, "rl.gcra");
      t.diagnostic(`${requests} requests in ${seconds.toFixed(2)} s, ${admitted} admitted, ${local} answered locally, ${commands} commands: ${(commands / requests).toFixed(3)} per request`);
      assert.ok(requests >= 8 * 50 * seconds, `offered ${requests}: at least 8x the limit`);
      assert.ok(admitted <= 50 * seconds + 5 + 1, `${admitted} admitted`);
      assert.ok(admitted >= 0.8 * 50 * seconds, `${admitted} admitted: the limit is still reached`);
      assert.ok(commands / requests <= 0.12, `${commands / requests} commands per request`);
    } finally {
      rl.close();
      await client.close();
      await server.stop();
    }
  });

  test("Ratelimit's ephemeralCache answers a denied identifier with reason cacheBlock, and can be turned off", async () => {
    const server = await Server.start();
    const client = await nodeRedis(2).open(server.url);
    try {
      const on = new Ratelimit({ redis: client.redis, limiter: Ratelimit.fixedWindow(1, "1 m"), prefix: "c" });
      assert.equal((await on.limit("a")).success, true);
      assert.deepEqual([(await on.limit("a")).reason, (await on.limit("a")).reason], [undefined, "cacheBlock"]);
      const off = new Ratelimit({ redis: client.redis, limiter: Ratelimit.fixedWindow(1, "1 m"), prefix: "c", ephemeralCache: false });
      assert.deepEqual([(await off.limit("a")).reason, (await off.limit("a")).reason], [undefined, undefined]);
    } finally {
      await client.close();
      await server.stop();
    }
  });
});
