// Many requests in flight on one key, and waiting on the server: what is
// admitted is exactly what the limit allows, whatever the client.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { type Decision, RateLimiter } from "redis-ratelimit";
import { CLIENTS, type OpenClient, Server, until } from "./harness.js";

const IN_FLIGHT = 50;

describe("in flight on one key", () => {
  let server: Server;
  before(async () => {
    server = await Server.start();
  });
  after(async () => server.stop());

  for (const kind of CLIENTS) {
    test(`${IN_FLIGHT} requests at once admit exactly the limit (${kind.name})`, async () => {
      // One pipelined connection and ten more, all sending at once.
      const clients: OpenClient[] = await Promise.all(Array.from({ length: 11 }, () => kind.open(server.url)));
      try {
        const limiters = clients.map((c) => new RateLimiter(c.redis));
        const on = (i: number): RateLimiter => limiters[i % limiters.length] ?? new RateLimiter(() => Promise.reject(new Error("none")));
        const burst = async (call: (rl: RateLimiter) => Promise<Decision>): Promise<number> => {
          const decisions = await Promise.all(Array.from({ length: IN_FLIGHT }, (_, i) => call(on(i))));
          return decisions.filter((d) => d.allowed).length;
        };
        const k = `${kind.name}:`;
        assert.equal(await burst((rl) => rl.gcra(`${k}g`, { limit: 10, period: "1m" })), 10);
        assert.equal(await burst((rl) => rl.bucket(`${k}b`, { capacity: 7, refill: 1, period: "1m" })), 7);
        assert.equal(await burst((rl) => rl.sliding(`${k}s`, { limit: 12, window: "1m" })), 12);
        assert.equal(await burst((rl) => rl.sliding(`${k}sa`, { limit: 12, window: "1m", mode: "approx" })), 12);
        assert.equal(await burst((rl) => rl.fixed(`${k}f`, { limit: 13, window: "1m" })), 13);
        assert.equal(await burst((rl) => rl.sketch(`${k}sk`, "ip", { limit: 9, window: "1m" })), 9);
        assert.equal(await burst((rl) => rl.acquire(`${k}c`, { limit: 5, ttl: "1m" })), 5);
        assert.equal(await burst((rl) => rl.gcra(`${k}p`, { limit: 20, period: "1m" }, { cost: 3 })), 6);
        const all = await Promise.all(
          Array.from({ length: IN_FLIGHT }, (_, i) =>
            on(i).all([
              { key: `{${k}}:a`, policy: { type: "gcra", limit: 30, period: "1m" } },
              { key: `{${k}}:b`, policy: { type: "fixed", limit: 8, window: "1m" } },
            ]),
          ),
        );
        assert.equal(all.filter((d) => d.allowed).length, 8);
      } finally {
        await Promise.all(clients.map((c) => c.close()));
      }
    });
  }
});

describe("waiting on the server", () => {
  let server: Server;
  before(async () => {
    server = await Server.start();
  });
  after(async () => server.stop());

  for (const kind of CLIENTS) {
    test(`a WAIT call blocks until the clock admits it (${kind.name})`, async () => {
      const [a, b] = [await kind.open(server.url), await kind.open(server.url)];
      try {
        const [rl, waiter] = [new RateLimiter(a.redis), new RateLimiter(b.redis)];
        const key = `wait:${kind.name}`;
        assert.equal((await rl.gcra(key, { limit: 1, period: "1s" })).allowed, true);
        const waiting = waiter.gcra(key, { limit: 1, period: "1s" }, { wait: "5s" });
        await until(async () => /ratelimit_waiting:1\r?\n/.test(String(await rl.raw(["INFO", "ratelimit"]))), "the waiter is queued");
        await rl.raw(["RL.CLOCK", "ADVANCE", "1000000"]);
        const d = await waiting;
        assert.equal(d.allowed, true);
        assert.equal(d.remaining, 0);
      } finally {
        await a.close();
        await b.close();
      }
    });
  }
});
