// The CommonJS build: require() gives the same API, deciding the same.
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { test } from "node:test";
import * as esm from "redis-ratelimit";
import { Server } from "./harness.js";

const require = createRequire(import.meta.url);

test("require('redis-ratelimit') and its subpaths load the CommonJS build", async () => {
  const cjs = require("redis-ratelimit") as typeof esm;
  assert.deepEqual(Object.keys(cjs).sort(), Object.keys(esm).sort());
  assert.notEqual(cjs.RateLimiter, esm.RateLimiter);
  assert.equal(typeof (require("redis-ratelimit/express") as { RedisRateLimitStore: unknown }).RedisRateLimitStore, "function");
  assert.equal(typeof (require("redis-ratelimit/upstash") as { Ratelimit: unknown }).Ratelimit, "function");
  const server = await Server.start();
  try {
    const { createClient } = require("redis") as typeof import("redis");
    const client = createClient({ url: server.url });
    await client.connect();
    const d = await new cjs.RateLimiter(client).gcra("cjs", { limit: 2, period: "1s" });
    assert.equal(d instanceof cjs.Decision, true);
    assert.equal(d.remaining, 1);
    client.destroy();
  } finally {
    await server.stop();
  }
});
