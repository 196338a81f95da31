// A real Express app over HTTP, limited by express-rate-limit with this
// store: its options kept, its own validations all on (any error or
// warning it logs fails the test), one command per hit.
import assert from "node:assert/strict";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import express from "express";
import { type Options, rateLimit } from "express-rate-limit";
import { RedisRateLimitStore } from "redis-ratelimit/express";
import { Redis } from "ioredis";
import { CLIENTS, type OpenClient, Server, nodeRedis } from "./harness.js";
import { RateLimiter } from "redis-ratelimit";

/** Everything express-rate-limit logs: its validations report through the logger. */
class Logged {
  readonly lines: string[] = [];
  readonly logger = {
    error: (e: unknown, m?: string) => this.lines.push(`error: ${m ?? ""} ${String(e)}`),
    warn: (e: unknown, m?: string) => this.lines.push(`warn: ${m ?? ""} ${String(e)}`),
  };
}

interface App {
  readonly url: string;
  readonly logged: Logged;
  readonly limiter: ReturnType<typeof rateLimit>;
  close(): Promise<void>;
}

async function serve(store: RedisRateLimitStore, options: Partial<Options>): Promise<App> {
  const logged = new Logged();
  const app = express();
  const limiter = rateLimit({ windowMs: 60_000, limit: 3, standardHeaders: "draft-8", legacyHeaders: false, validate: true, logger: logged.logger, store, ...options });
  app.use(limiter);
  app.get("/", (_req, res) => void res.send("ok"));
  app.get("/fail", (_req, res) => void res.status(500).send("failed"));
  const server = await new Promise<ReturnType<typeof app.listen>>((ok) => {
    const s = app.listen(0, "127.0.0.1", () => ok(s));
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    logged,
    limiter,
    close: () =>
      new Promise((ok) => {
        server.close(() => ok());
        server.closeAllConnections();
      }),
  };
}

async function statuses(url: string, n: number, path = "/"): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push((await fetch(url + path)).status);
  return out;
}

/** Calls of every command since the last CONFIG RESETSTAT, but INFO's own. */
async function commandCalls(rl: RateLimiter): Promise<Record<string, number>> {
  const info = String(await rl.raw(["INFO", "commandstats"]));
  const calls: Record<string, number> = {};
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    if (m[1] !== "info") calls[m[1] ?? ""] = Number(m[2]);
  }
  return calls;
}

describe("express-rate-limit with RedisRateLimitStore", () => {
  let server: Server;
  let client: OpenClient;
  let rl: RateLimiter;
  before(async () => {
    server = await Server.start();
    client = await nodeRedis(3).open(server.url);
    rl = new RateLimiter(client.redis);
  });
  after(async () => {
    await client.close();
    await server.stop();
  });

  for (const kind of CLIENTS) {
    test(`3 pass, the 4th is 429, with the draft-8 headers (${kind.name})`, async () => {
      const own = await kind.open(server.url);
      const store = new RedisRateLimitStore({ client: own.redis, prefix: `rl:${kind.name}:` });
      const app = await serve(store, {});
      try {
        assert.deepEqual(await statuses(app.url, 3), [200, 200, 200]);
        const denied = await fetch(app.url);
        assert.equal(denied.status, 429);
        assert.match(denied.headers.get("ratelimit-policy") ?? "", /^"3-in-1min"; q=3; w=60; pk=:[^:]+:$/);
        assert.match(denied.headers.get("ratelimit") ?? "", /^"3-in-1min"; r=0; t=(59|60)$/);
        assert.match(denied.headers.get("retry-after") ?? "", /^(59|60)$/);
        assert.deepEqual(app.logged.lines, []);
      } finally {
        await app.close();
        await own.close();
      }
    });
  }

  test("rate-limit-redis's sendCommand shape, one command per hit", async () => {
    const store = new RedisRateLimitStore({ sendCommand: (...args: string[]) => rl.sendCommand(args), prefix: "rl:count:" });
    const app = await serve(store, { limit: 5 });
    try {
      await rl.raw(["CONFIG", "RESETSTAT"]);
      assert.deepEqual(await statuses(app.url, 8), [200, 200, 200, 200, 200, 429, 429, 429]);
      const calls = await commandCalls(rl);
      delete calls["config|resetstat"];
      assert.deepEqual(calls, { "rl.fixed": 8 });
      assert.deepEqual(app.logged.lines, []);
    } finally {
      await app.close();
    }
  });

  test("50 requests in flight on one key: exactly the limit pass", async () => {
    const store = new RedisRateLimitStore({ client: client.redis, prefix: "rl:flight:" });
    const app = await serve(store, { limit: 10 });
    try {
      const codes = await Promise.all(Array.from({ length: 50 }, () => fetch(app.url).then((r) => r.status)));
      assert.equal(codes.filter((c) => c === 200).length, 10);
      assert.equal(codes.filter((c) => c === 429).length, 40);
      assert.deepEqual(app.logged.lines, []);
    } finally {
      await app.close();
    }
  });

  test("the window ends on the server's clock; resetKey and getKey", async () => {
    const store = new RedisRateLimitStore({ client: client.redis, prefix: "rl:window:" });
    const app = await serve(store, { limit: 2, windowMs: 10_000 });
    try {
      assert.deepEqual(await statuses(app.url, 3), [200, 200, 429]);
      const info = await app.limiter.getKey("127.0.0.1");
      assert.equal(info?.totalHits, 3);
      await rl.raw(["RL.CLOCK", "ADVANCE", "10000000"]);
      assert.deepEqual(await statuses(app.url, 3), [200, 200, 429]);
      await store.resetKey("127.0.0.1");
      assert.equal(await app.limiter.getKey("127.0.0.1"), undefined);
      assert.deepEqual(await statuses(app.url, 1), [200]);
      assert.deepEqual(app.logged.lines, []);
    } finally {
      await app.close();
    }
  });

  test("skipFailedRequests: a failed request is taken back (REFUND 1)", async () => {
    const store = new RedisRateLimitStore({ client: client.redis, prefix: "rl:skip:" });
    const app = await serve(store, { limit: 2, skipFailedRequests: true });
    try {
      const finished = async (): Promise<void> => {
        // The decrement runs after the response: wait until the count says so.
        for (let i = 0; i < 1000 && ((await store.get("127.0.0.1"))?.totalHits ?? 0) > 0; i++) await new Promise((r) => setImmediate(r));
      };
      for (let i = 0; i < 4; i++) {
        assert.equal((await fetch(`${app.url}/fail`)).status, 500);
        await finished();
      }
      assert.deepEqual(await statuses(app.url, 3), [200, 200, 429]);
      assert.deepEqual(app.logged.lines, []);
    } finally {
      await app.close();
    }
  });

  test("a limit per request (a function) and the sliding window keep express-rate-limit's options", async () => {
    const store = new RedisRateLimitStore({ client: client.redis, prefix: "rl:sliding:", window: "sliding" });
    const app = await serve(store, { limit: (req) => (req.get("x-plan") === "pro" ? 4 : 1) });
    try {
      assert.deepEqual(await statuses(app.url, 2), [200, 429]);
      const pro = async (): Promise<number> => (await fetch(app.url, { headers: { "x-plan": "pro" } })).status;
      // The same key has 2 hits: a pro request is the 3rd and 4th, then over.
      assert.deepEqual([await pro(), await pro(), await pro()], [200, 200, 429]);
      assert.deepEqual(app.logged.lines, []);
    } finally {
      await app.close();
    }
  });

  test("Redis stopped and restarted: passOnStoreError lets requests through, then limiting resumes", async () => {
    const own = await Server.start();
    // Commands fail at once while disconnected; reconnect every 20 ms.
    const c = new Redis(own.url, { maxRetriesPerRequest: 0, retryStrategy: () => 20 });
    c.on("error", () => undefined);
    const store = new RedisRateLimitStore({ client: c, prefix: "rl:down:" });
    const app = await serve(store, { limit: 1, passOnStoreError: true });
    try {
      assert.deepEqual(await statuses(app.url, 2), [200, 429]);
      await own.kill();
      const status = (await fetch(app.url)).status;
      assert.equal(status, 200);
      assert.ok(app.logged.lines.some((l) => l.includes("allowing request without rate-limiting")));
      await own.spawn();
      if (c.status !== "ready") await new Promise((r) => c.once("ready", r));
      // The circuit closes at the first answered probe, within 150 ms.
      while (store.guard.open) await new Promise((r) => setTimeout(r, 10));
      assert.deepEqual(await statuses(app.url, 2), [200, 429]);
    } finally {
      await app.close();
      c.disconnect();
      await own.stop();
    }
  });
});
