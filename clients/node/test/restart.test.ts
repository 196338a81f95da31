// The server stopped and started again on the same port: a call made while
// it is down answers its fallback at once and is never sent later (not even
// by the client's offline queue), and typed calls work again once it is back.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { createClient } from "redis";
import { RateLimiter, UnavailableError } from "redis-ratelimit";
import { CLIENTS, Server } from "./harness.js";

async function closed(rl: RateLimiter): Promise<void> {
  for (let i = 0; i < 500 && rl.guard.open; i++) await new Promise((r) => setTimeout(r, 10));
  assert.equal(rl.guard.open, false, "the circuit closes once the server is back");
}

describe("server stopped and restarted", () => {
  for (const kind of CLIENTS) {
    test(`a call made while it is down answers the fallback and is never sent (${kind.name})`, async () => {
      const server = await Server.start();
      const client = await kind.open(server.url);
      try {
        const rl = new RateLimiter(client.redis, { timeout: 200 });
        assert.equal((await rl.gcra("k", { limit: 3, period: "1m" })).remaining, 2);
        await server.kill();
        const down = await rl.gcra("k", { limit: 3, period: "1m" });
        assert.equal(down.allowed, false);
        assert.ok(down.fallback === "unavailable" || down.fallback === "timeout");
        assert.equal(down.headers()["retry-after"], "1");
        const open = await rl.gcra("k", { limit: 3, period: "1m" }, { fallback: "open" });
        assert.equal(open.allowed, true);
        await assert.rejects(rl.gcra("k", { limit: 3, period: "1m" }, { fallback: "error" }), UnavailableError);
        await server.spawn();
        await closed(rl);
        // Nothing was saved, and nothing made during the outage was sent later: the limiter starts full.
        assert.equal((await rl.gcra("k", { limit: 3, period: "1m" })).remaining, 2);
        rl.close();
      } finally {
        await client.close();
        await server.stop();
      }
    });
  }

  for (const kind of [CLIENTS[0], CLIENTS[2]]) {
    if (kind === undefined) continue;
    test(`a frozen server: the per-call deadline and AbortSignal answer on time (${kind.name})`, async () => {
      const server = await Server.start();
      const client = await kind.open(server.url);
      const rl = new RateLimiter(client.redis, { timeout: 5000 });
      try {
        assert.equal((await rl.gcra("f", { limit: 3, period: "1m" })).allowed, true);
        server.pause();
        let started = performance.now();
        const aborted = await rl.gcra("f", { limit: 3, period: "1m" }, { signal: AbortSignal.timeout(30) }).catch((e: unknown) => e);
        assert.ok(aborted instanceof Error && aborted.name === "TimeoutError", String(aborted));
        assert.ok(performance.now() - started < 30 + 100);
        started = performance.now();
        const d = await rl.gcra("f", { limit: 3, period: "1m" }, { timeout: 50 });
        const took = performance.now() - started;
        assert.deepEqual([d.allowed, d.fallback], [false, "timeout"]);
        assert.ok(took >= 49 && took < 50 + 100, `${took} ms`);
        // The circuit is open: at once, nothing sent.
        started = performance.now();
        assert.equal((await rl.gcra("f", { limit: 3, period: "1m" })).fallback, "unavailable");
        assert.ok(performance.now() - started < 20);
        server.resume();
        await closed(rl);
        assert.equal((await rl.gcra("f", { limit: 3, period: "1m" })).fallback, undefined);
      } finally {
        server.resume();
        rl.close();
        await client.close();
        await server.stop();
      }
    });
  }

  test("without an offline queue the call answers the fallback too", async () => {
    const server = await Server.start();
    const client = createClient({ url: server.url, disableOfflineQueue: true });
    client.on("error", () => undefined);
    await client.connect();
    try {
      const rl = new RateLimiter(client, { fallback: "error" });
      await server.kill();
      const error = await rl.gcra("k", { limit: 3, period: "1m" }).catch((e: unknown) => e);
      assert.ok(error instanceof UnavailableError);
      rl.close();
    } finally {
      client.destroy();
      await server.stop();
    }
  });
});
