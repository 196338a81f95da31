// Block leasing: many requests in flight per key in one process, several
// processes (each its own connection and lease) on one key, and the keys the
// server names hot leased without configuration. Commands are counted by the
// server (INFO commandstats); the state after release is read with RL.PEEK.
// Manual clock, frozen: no unit comes back during a run, so what is admitted
// can be compared with the limit exactly.
import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import { HotKeyLeases, LeasedLimit, RateLimiter } from "redis-ratelimit";
import { CLIENTS, type OpenClient, suiteServer, until } from "./harness.js";

const BLOCK = 20;
// One unit takes 900 s to come back: nothing refills (and no key expires on real time) during a run.
const LIMIT = 4000;
const POLICY = { type: "gcra", limit: LIMIT, period: "1000h" } as const;

/** `RL.*` decision commands the server ran (all but RL.CLOCK, RL.PEEK, RL.HOTKEYS), from INFO commandstats. */
async function decisionCommands(rl: RateLimiter): Promise<number> {
  const info = await rl.raw(["INFO", "commandstats"]);
  const text = typeof info === "string" ? info : Buffer.from(info as Uint8Array).toString("utf8");
  let calls = 0;
  for (const m of text.matchAll(/^cmdstat_(rl\.[a-z.]+):calls=(\d+)/gim)) {
    if (!["rl.clock", "rl.peek", "rl.hotkeys"].includes((m[1] ?? "").toLowerCase())) calls += Number(m[2]);
  }
  return calls;
}

/** `inFlight` closed loops, `each` requests each, on `lease`; resolves to the admissions. */
async function closedLoops(lease: LeasedLimit, inFlight: number, each: number): Promise<number> {
  let admitted = 0;
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      for (let n = 0; n < each; n++) if ((await lease.acquire({ timeout: 5000 })).allowed) admitted++;
    }),
  );
  return admitted;
}

describe("block leasing", () => {
  const server = suiteServer();

  for (const kind of CLIENTS) {
    describe(kind.name, () => {
      const opened: OpenClient[] = [];
      const limiter = async (): Promise<RateLimiter> => {
        const c = await kind.open(server().url);
        opened.push(c);
        return new RateLimiter(c.redis, { timeout: 2000 });
      };
      after(async () => {
        await Promise.all(opened.map((c) => c.close()));
      });

      test("50 in flight on one key in one process: about one command per block, never past the limit, all given back", async (t) => {
        const rl = await limiter();
        await rl.raw(["FLUSHALL"]);
        await rl.raw(["RL.CLOCK", "SET", "1767225600000000"]);
        await rl.raw(["CONFIG", "RESETSTAT"]);
        const lease = new LeasedLimit(rl, "hot", POLICY, { block: BLOCK });
        // 5,000 requests for 4,000 units: the key is spent before the end.
        const admitted = await closedLoops(lease, 50, 100);
        assert.equal(await lease.release(), true);
        const commands = await decisionCommands(rl);
        const perAdmission = commands / admitted;
        t.diagnostic(JSON.stringify({ inFlight: 50, requests: 5000, admitted, commands, perAdmission: Number(perAdmission.toFixed(4)) }));
        assert.equal(admitted, LIMIT);
        assert.ok(perAdmission <= 0.055, `${perAdmission} commands per admission`);
        assert.equal((await rl.peek("hot", POLICY)).remaining, LIMIT - admitted);
      });

      test("3 processes, 50 in flight each, on one key: within the bound, about one command per block, reconciled", async (t) => {
        const [first, ...others] = await Promise.all([limiter(), limiter(), limiter()]);
        const processes = [first, ...others];
        await first.raw(["FLUSHALL"]);
        await first.raw(["RL.CLOCK", "SET", "1767225600000000"]);
        await first.raw(["CONFIG", "RESETSTAT"]);
        const leases = processes.map((rl) => new LeasedLimit(rl, "shared", POLICY, { block: BLOCK }));
        // Uneven demand: 2,000, 1,500 and 1,000 requests.
        const admitted = await Promise.all(leases.map((l, i) => closedLoops(l, 50, 40 - 10 * i)));
        const total = admitted.reduce((a, b) => a + b, 0);
        // Before release: what the server charged is what was admitted plus what the processes hold.
        const held = leases.reduce((a, l) => a + l.held, 0);
        assert.equal((await first.peek("shared", POLICY)).remaining, LIMIT - total - held);
        assert.ok(held <= BLOCK * leases.length, `${held} units held, more than a block per process`);
        for (const l of leases) assert.equal(await l.release(), true);
        const commands = await decisionCommands(first);
        const perAdmission = commands / total;
        t.diagnostic(JSON.stringify({ processes: 3, inFlight: 50, requests: [2000, 1500, 1000], admitted, commands, perAdmission: Number(perAdmission.toFixed(4)) }));
        assert.ok(total <= LIMIT, `${total} admitted of ${LIMIT}`);
        assert.ok(total >= 4000, `${total} admitted`);
        assert.ok(perAdmission <= 0.055, `${perAdmission} commands per admission`);
        assert.equal((await first.peek("shared", POLICY)).remaining, LIMIT - total);
      });

      test("queued blocks: 3 leases, 50 in flight each, callers giving up at seeded random points: whole blocks, reconciled", async (t) => {
        const [first, ...others] = await Promise.all([limiter(), limiter(), limiter()]);
        const processes = [first, ...others];
        await first.raw(["FLUSHALL"]);
        await first.raw(["RL.CLOCK", "SET", "1767225600000000"]);
        await first.raw(["CONFIG", "RESETSTAT"]);
        const leases = processes.map((rl) => new LeasedLimit(rl, "queued", POLICY, { block: BLOCK, queue: 1000 }));
        let seed = 7;
        const random = (): number => {
          seed = (seed * 1103515245 + 12345) % 2147483648;
          return seed / 2147483648;
        };
        let admitted = 0;
        let gaveUp = 0;
        await Promise.all(
          leases.flatMap((lease) =>
            Array.from({ length: 50 }, async () => {
              for (let n = 0; n < 40; n++) {
                // One request in four gives up within 0–2 ms.
                const signal = random() < 0.25 ? AbortSignal.timeout(Math.floor(random() * 3)) : undefined;
                try {
                  if ((await lease.acquire(signal === undefined ? {} : { signal })).allowed) admitted++;
                } catch {
                  gaveUp++;
                }
              }
            }),
          ),
        );
        for (const l of leases) await until(async () => l.release(), "released");
        const commands = await decisionCommands(first);
        t.diagnostic(JSON.stringify({ leases: 3, inFlight: 50, requests: 6000, admitted, gaveUp, commands, perAdmission: Number((commands / admitted).toFixed(4)) }));
        assert.ok(admitted <= LIMIT, `${admitted} admitted of ${LIMIT}`);
        assert.ok(admitted >= LIMIT - 3 * BLOCK, `${admitted} admitted`);
        assert.ok(commands / admitted <= 0.055, `${commands} commands for ${admitted} admissions`);
        // What the server charged is exactly what the callers were told was admitted.
        assert.equal((await first.peek("queued", POLICY)).remaining, LIMIT - admitted);
      });

      test("a queued block written to a frozen server and given up at its deadline is refunded when it lands", async () => {
        const rl = await limiter();
        const short = new RateLimiter((opened.at(-1) as OpenClient).redis, { timeout: 100 });
        await rl.raw(["FLUSHALL"]);
        await rl.raw(["RL.CLOCK", "SET", "1767225600000000"]);
        // A waiting call first: the wait pool holds a connection when the server freezes.
        await short.decide("warm", POLICY, { wait: "10ms" });
        await rl.raw(["CONFIG", "RESETSTAT"]);
        const lease = new LeasedLimit(short, "late", POLICY, { block: BLOCK, queue: 50 });
        server().pause();
        try {
          const d = await lease.acquire();
          assert.equal(d.fallback, "timeout");
          assert.equal(d.allowed, false);
          // The request's deadline is set before the block call's own: a reply landing between the two would
          // rightly land in the block. `release` waits for the call out (it ends at its own deadline) and,
          // nothing being held, sends nothing.
          assert.equal(await lease.release(), true);
          assert.equal(lease.held, 0);
        } finally {
          server().resume();
        }
        // The block call ran late and its refund after it: both counted by the server, then nothing is charged.
        await until(async () => {
          const info = String(await rl.raw(["INFO", "commandstats"]));
          return /cmdstat_rl\.gcra:calls=2,/.test(info);
        }, "the late block and its refund");
        assert.equal(lease.held, 0);
        assert.equal((await rl.peek("late", POLICY)).remaining, LIMIT);
        short.close();
      });

      test("a cost above the block is decided by the server; a caller that gives up leaves the block to the others", async () => {
        const rl = await limiter();
        await rl.raw(["FLUSHALL"]);
        await rl.raw(["RL.CLOCK", "SET", "1767225600000000"]);
        const lease = new LeasedLimit(rl, "big", POLICY, { block: BLOCK });
        const big = await lease.acquire({ cost: BLOCK + 1 });
        assert.equal(big.allowed, true);
        assert.notEqual(big.leased, true);
        const controller = new AbortController();
        controller.abort(new Error("gave up"));
        await assert.rejects(lease.acquire({ signal: controller.signal }), /gave up/);
        const d = await lease.acquire();
        assert.equal(d.allowed, true);
        assert.equal(lease.held, BLOCK - 1);
        assert.equal(await lease.release(), true);
        assert.equal((await rl.peek("big", POLICY)).remaining, LIMIT - BLOCK - 2);
      });
    });
  }

  test("the keys the server names hot are leased, exactly those, and given back once no longer named", async (t) => {
    const open = await CLIENTS[0]?.open(server().url);
    assert.ok(open !== undefined);
    const rl = new RateLimiter(open.redis, { timeout: 2000 });
    try {
      await rl.raw(["FLUSHALL"]);
      // Counting is on by default: off and on again starts it over, without the earlier tests' keys.
      await rl.raw(["CONFIG", "SET", "ratelimit.hot-key-counters", "0"]);
      await rl.raw(["CONFIG", "SET", "ratelimit.hot-key-counters", "320"]);
      const start = 1767225600000000n;
      await rl.raw(["RL.CLOCK", "SET", String(start)]);
      assert.throws(() => new HotKeyLeases(rl, POLICY, { block: BLOCK, queue: 0 }), RangeError);
      const hot = new HotKeyLeases(rl, POLICY, { block: BLOCK, count: 10, perSecond: 100 });
      // Before any poll: every key is decided per request.
      for (let i = 0; i < 300; i++) await hot.decide("rl:hot");
      for (let i = 0; i < 20; i++) await hot.decide(`rl:cold:${i}`);
      await rl.raw(["CONFIG", "RESETSTAT"]);
      // A second of the limiter's clock has passed: rates are counted over it (300/s, 1/s).
      await rl.raw(["RL.CLOCK", "SET", String(start + 999_000n)]);
      await hot.refresh();
      assert.deepEqual(hot.hotKeys(), ["rl:hot"]);
      // 50 in flight on the hot key, one at a time on each cold key.
      let admitted = 0;
      await Promise.all([
        ...Array.from({ length: 50 }, async () => {
          for (let n = 0; n < 40; n++) if ((await hot.decide("rl:hot")).allowed) admitted++;
        }),
        (async () => {
          for (let i = 0; i < 20; i++) assert.equal((await hot.decide(`rl:cold:${i}`)).allowed, true);
        })(),
      ]);
      const commands = await decisionCommands(rl);
      const lease = hot.leaseOf("rl:hot");
      assert.ok(lease !== undefined);
      t.diagnostic(JSON.stringify({ hotRequests: 2000, admitted, coldRequests: 20, commands, hotCommands: lease.commands }));
      assert.equal(admitted, 2000);
      assert.equal(commands - lease.commands, 20, "one command per cold request");
      assert.ok(lease.commands / admitted <= 0.055, `${lease.commands} commands for ${admitted} admissions`);
      // The server state is what was admitted plus the units held.
      assert.equal((await rl.peek("rl:hot", POLICY)).remaining, LIMIT - 300 - admitted - lease.held);
      // Three seconds later nothing was decided: the list is empty, the held units go back.
      await rl.raw(["RL.CLOCK", "SET", String(start + 3_000_000n)]);
      await hot.refresh();
      assert.deepEqual(hot.hotKeys(), []);
      assert.equal((await rl.peek("rl:hot", POLICY)).remaining, LIMIT - 300 - admitted);
      await hot.close();
    } finally {
      await rl.raw(["CONFIG", "SET", "ratelimit.hot-key-counters", "0"]).catch(() => undefined);
      rl.close();
      await open.close();
    }
  });
});
