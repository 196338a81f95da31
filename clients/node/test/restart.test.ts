// The server stopped and started again on the same port: calls made while
// it is down are the client's to queue or fail (never a ReplyError), and
// typed calls work again once it is back.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { createClient } from "redis";
import { RateLimiter, ReplyError } from "redis-ratelimit";
import { CLIENTS, Server } from "./harness.js";

describe("server stopped and restarted", () => {
  for (const kind of CLIENTS) {
    test(`a call made while it is down is answered once it is back (${kind.name})`, async () => {
      const server = await Server.start();
      const client = await kind.open(server.url);
      try {
        const rl = new RateLimiter(client.redis);
        assert.equal((await rl.gcra("k", { limit: 3, period: "1m" })).remaining, 2);
        await server.kill();
        // Both clients queue the command and reconnect by themselves.
        const pending = rl.gcra("k", { limit: 3, period: "1m" });
        await server.spawn();
        // Nothing was saved: the limiter starts full on the new server.
        assert.equal((await pending).remaining, 2);
        assert.equal((await rl.gcra("k", { limit: 3, period: "1m" })).remaining, 1);
      } finally {
        await client.close();
        await server.stop();
      }
    });
  }

  test("without an offline queue the call fails with the client's error, not a ReplyError", async () => {
    const server = await Server.start();
    const client = createClient({ url: server.url, disableOfflineQueue: true });
    client.on("error", () => undefined);
    await client.connect();
    try {
      const rl = new RateLimiter(client);
      await server.kill();
      const error = await rl.gcra("k", { limit: 3, period: "1m" }).catch((e: unknown) => e);
      assert.ok(error instanceof Error);
      assert.ok(!(error instanceof ReplyError));
    } finally {
      client.destroy();
      await server.stop();
    }
  });
});
