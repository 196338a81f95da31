// withLease: released in finally, renewed while the work runs, aborted
// mid-work by an AbortSignal.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { LeaseLostError, RateLimiter, withLease } from "redis-ratelimit";
import { CLIENTS, type OpenClient, Server } from "./harness.js";

describe("withLease", () => {
  let server: Server;
  before(async () => {
    server = await Server.start();
  });
  after(async () => server.stop());

  for (const kind of CLIENTS) {
    describe(kind.name, () => {
      let client: OpenClient;
      let rl: RateLimiter;
      before(async () => {
        client = await kind.open(server.url);
        rl = new RateLimiter(client.redis);
      });
      after(async () => client.close());
      const free = async (key: string): Promise<number> => (await rl.peek(key, { type: "concurrency", limit: 2, ttl: "1m" })).remaining;

      test("runs the work holding a slot, releases it after, and after a throw", async () => {
        const key = `lease:${kind.name}:a`;
        const result = await withLease(rl, key, { limit: 2, ttl: "1m" }, async (held) => {
          assert.match(held.lease, /^[0-9a-f]{44}$/);
          assert.equal(await free(key), 1);
          return "done";
        });
        assert.deepEqual(result.acquired && result.value, "done");
        assert.equal(await free(key), 2);
        await assert.rejects(
          withLease(rl, key, { limit: 2, ttl: "1m" }, async () => {
            throw new Error("work failed");
          }),
          /work failed/,
        );
        assert.equal(await free(key), 2);
      });

      test("does not run the work when no slot is free", async () => {
        const key = `lease:${kind.name}:full`;
        const held = await rl.acquire(key, { limit: 1, ttl: "1m" });
        let ran = false;
        const result = await withLease(rl, key, { limit: 1, ttl: "1m" }, async () => {
          ran = true;
        });
        assert.equal(result.acquired, false);
        assert.equal(result.decision.retryAfterMs, 60000);
        assert.equal(ran, false);
        await rl.release(key, held.lease ?? "");
      });

      test("renews while the work runs, past the lease's ttl", async () => {
        const key = `lease:${kind.name}:renew`;
        let renewed = 0;
        let onRenewed: () => void = () => undefined;
        const result = await withLease(
          rl,
          key,
          { limit: 1, ttl: "10s", renewEvery: 5, onRenew: () => (renewed++, onRenewed()) },
          async () => {
            // Move the clock 8 s after each renewal: 16 s in all, longer than
            // the 10 s ttl; the renewals keep the lease alive.
            for (let i = 0; i < 2; i++) {
              const before = renewed;
              await new Promise<void>((r) => (onRenewed = r));
              assert.ok(renewed > before);
              await rl.raw(["RL.CLOCK", "ADVANCE", "8000000"]);
            }
            const other = await rl.acquire(key, { limit: 1, ttl: "10s" });
            return other.allowed;
          },
        );
        assert.deepEqual(result, { acquired: true, value: false, decision: result.decision });
        assert.equal((await rl.peek(key, { type: "concurrency", limit: 1, ttl: "10s" })).remaining, 1);
      });

      test("a lease lost to its ttl aborts the work's signal with LeaseLostError", async () => {
        const key = `lease:${kind.name}:lost`;
        const result = withLease(rl, key, { limit: 1, ttl: "1s", renewEvery: 5 }, async (held) => {
          await rl.raw(["RL.CLOCK", "ADVANCE", "2000000"]);
          await new Promise((r) => held.signal.addEventListener("abort", r, { once: true }));
          throw held.signal.reason;
        });
        await assert.rejects(result, LeaseLostError);
      });

      test("aborted mid-work: released at once, rejects with the reason", async () => {
        const key = `lease:${kind.name}:abort`;
        const controller = new AbortController();
        let workSignal: AbortSignal | undefined;
        let started: () => void = () => undefined;
        const isStarted = new Promise<void>((r) => (started = r));
        const running = withLease(rl, key, { limit: 2, ttl: "1m", signal: controller.signal }, async (held) => {
          workSignal = held.signal;
          started();
          await new Promise(() => undefined); // work that never ends by itself
        });
        await isStarted;
        assert.equal(await free(key), 1);
        controller.abort(new Error("client went away"));
        await assert.rejects(running, /client went away/);
        assert.equal(workSignal?.aborted, true);
        assert.equal(await free(key), 2);
        // Aborted before it starts: nothing is sent.
        await assert.rejects(withLease(rl, key, { limit: 2, ttl: "1m", signal: AbortSignal.abort() }, async () => 1), { name: "AbortError" });
        assert.equal(await free(key), 2);
      });
    });
  }
});
