// The migration guide from rate-limit-redis, run: the same express app
// before (rate-limit-redis's RedisStore) and after (RedisRateLimitStore,
// the class name changed), driven through one request sequence against one
// server; status codes and rate-limit header fields compared. Every
// difference is listed here and in the README.
import assert from "node:assert/strict";
import type { AddressInfo } from "node:net";
import { after, before, test } from "node:test";
import express from "express";
import { type Store, rateLimit } from "express-rate-limit";
import { RedisStore } from "rate-limit-redis";
import { RedisRateLimitStore } from "redis-ratelimit/express";
import { createClient } from "redis";
import { Server } from "./harness.js";

/** What one response says: its status and the rate-limit fields. */
interface Seen {
  readonly status: number;
  readonly fields: Readonly<Record<string, string | null>>;
}

const FIELDS = ["ratelimit-policy", "ratelimit", "retry-after", "x-ratelimit-limit", "x-ratelimit-remaining"];

async function drive(store: Store, requests: readonly string[]): Promise<Seen[]> {
  const app = express();
  app.use(rateLimit({ windowMs: 60_000, limit: 3, standardHeaders: "draft-8", legacyHeaders: true, store, keyGenerator: (req) => String(req.query.user) }));
  app.get("/", (_req, res) => void res.send("ok"));
  const server = await new Promise<ReturnType<typeof app.listen>>((ok) => {
    const s = app.listen(0, "127.0.0.1", () => ok(s));
  });
  const { port } = server.address() as AddressInfo;
  try {
    const seen: Seen[] = [];
    for (const user of requests) {
      const r = await fetch(`http://127.0.0.1:${port}/?user=${user}`);
      await r.text();
      seen.push({ status: r.status, fields: Object.fromEntries(FIELDS.map((f) => [f, r.headers.get(f)])) });
    }
    return seen;
  } finally {
    await new Promise<void>((ok) => {
      server.close(() => ok());
      server.closeAllConnections();
    });
  }
}

let server: Server;
let client: ReturnType<typeof createClient>;
before(async () => {
  // The module's clock frozen (manual): its windows do not move during the run; rate-limit-redis
  // counts on the server's real time (PTTL), a 60 s window that does not end during the run either.
  server = await Server.start();
  client = createClient({ url: server.url });
  await client.connect();
});
after(async () => {
  client.destroy();
  await server.stop();
});

test("from rate-limit-redis: the same statuses and header fields for the same requests", async () => {
  const sendCommand = (...args: string[]): Promise<never> => client.sendCommand<never>(args);
  const requests = ["a", "a", "b", "a", "a", "b", "b", "b", "a"];
  const before = await drive(new RedisStore({ sendCommand }), requests);
  const afterMove = await drive(new RedisRateLimitStore({ sendCommand }), requests);
  assert.deepEqual(
    afterMove.map((s) => s.status),
    before.map((s) => s.status),
  );
  assert.deepEqual(
    before.map((s) => s.status),
    [200, 200, 200, 200, 429, 200, 200, 429, 429],
  );
  // Every field, request by request: equal. (Retry-After and the reset `t` are whole seconds left in
  // the window, 60 in both while the window has just begun.)
  const differences = before.flatMap((b, i) =>
    FIELDS.filter((f) => b.fields[f] !== afterMove[i]?.fields[f]).map((f) => `request ${i}: ${f} ${String(b.fields[f])} -> ${String(afterMove[i]?.fields[f])}`),
  );
  assert.deepEqual(differences, []);
  // Both ran on one server at once: the default prefixes differ (rl: and ratelimit:), no WRONGTYPE.
  assert.equal(await client.exists("rl:a"), 1);
  assert.equal(await client.exists("ratelimit:a"), 1);
});
