// Every typed call, with both clients in both protocols, against a real
// server on the manual clock: the same script must give the same typed
// decisions everywhere, and the values the docs give.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { type AllDecision, type Decision, RateLimiter, ReplyError, WrongTypeError } from "redis-ratelimit";
import { CLIENTS, type OpenClient, Server } from "./harness.js";

/** A day boundary, so that aligned windows start here. */
const START_US = 1_699_920_000_000_000n;

type Plain = Record<string, unknown>;

function plain(d: Decision): Plain {
  // Own fields only: the class's prototype and its `described` stay out.
  const fields: Plain = Object.fromEntries(Object.entries(d));
  delete fields.described;
  return fields;
}

function plainAll(d: AllDecision): Plain {
  return { allowed: d.allowed, blockedBy: d.blockedBy, retryAfterMs: d.retryAfterMs, limits: d.limits.map(plain) };
}

/** Runs every typed call once; returns what each answered. */
async function script(rl: RateLimiter): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {};
  out.gcra = [
    plain(await rl.gcra("g", { limit: 100, period: "1m", burst: 20 })),
    plain(await rl.gcra("g", { limit: 100, period: "1m", burst: 20 }, { cost: 19 })),
    plain(await rl.gcra("g", { limit: 100, period: 60_000, burst: 20 })),
    plain(await rl.gcra("g", { limit: 100, period: "1 m", burst: 20 }, { dryRun: true })),
  ];
  out.gcraHeaders = (await rl.gcra("g", { limit: 100, period: "1m", burst: 20 }, { name: "per-key" })).headers();
  out.reconcile = [
    plain(await rl.gcra("t", { limit: 10_000, period: "1m" }, { cost: 2000 })),
    plain(await rl.gcra("t", { limit: 10_000, period: "1m" }, { refund: 1500 })),
    plain(await rl.gcra("t", { limit: 10_000, period: "1m" }, { cost: 10_000, force: true })),
    plain(await rl.gcra("p", { limit: 10, period: "1s" }, { cost: 15, partial: true })),
  ];
  out.bucket = [
    plain(await rl.bucket("b", { capacity: 100, refill: 10, period: "1s" }, { cost: 60 })),
    plain(await rl.bucket("b", { capacity: 100, refill: 10, period: "1s" }, { cost: 60 })),
  ];
  const sliding = [];
  for (let i = 0; i < 6; i++) sliding.push(plain(await rl.sliding("s", { limit: 5, window: "15m" })));
  sliding.push(plain(await rl.sliding("sb", { limit: 100, window: "1m", mode: { buckets: 6 } }, { cost: 95 })));
  sliding.push(plain(await rl.sliding("sa", { limit: 10, window: "1m", mode: "approx" })));
  sliding.push(plain(await rl.sliding("se", { limit: 10, window: "1m", mode: "exact" })));
  out.sliding = sliding;
  out.fixed = [
    plain(await rl.fixed("fa", { limit: 1000, window: "1d", aligned: true })),
    plain(await rl.fixed("f", { limit: 1000, window: "1d" })),
  ];
  out.sketch = plain(await rl.sketch("ip", "203.0.113.7", { limit: 100, window: "1m" }));
  out.all = [
    plainAll(await rl.all([
      { key: "{o}:u", policy: { type: "gcra", limit: 10, period: "1s" } },
      { key: "{o}", policy: { type: "gcra", limit: 15, period: "1s" } },
    ])),
    plainAll(await rl.all([
      { key: "{a}:1", policy: { type: "gcra", limit: 1, period: "1s" } },
      { key: "{a}:2", policy: { type: "fixed", limit: 3, window: "1m" } },
    ])),
    plainAll(await rl.all([
      { key: "{a}:1", policy: { type: "gcra", limit: 1, period: "1s" } },
      { key: "{a}:2", policy: { type: "fixed", limit: 3, window: "1m" } },
    ])),
    plainAll(await rl.all([
      { key: "{u}:req", policy: { type: "gcra", limit: 100, period: "1m" } },
      { key: "{u}:bytes", policy: { type: "fixed", limit: 1_048_576, window: "1m" } },
    ], { costs: [1, 300_000] })),
    plainAll(await rl.all([
      { key: "{c}:rate", policy: { type: "gcra", limit: 100, period: "1m" } },
      { key: "{c}:inflight", policy: { type: "concurrency", limit: 5, ttl: "30s" } },
    ], { dryRun: true })),
  ];
  const limits = [
    { key: "{h}:1", policy: { type: "gcra", limit: 10, period: "1s" }, name: "per-key" },
    { key: "{h}:2", policy: { type: "sliding", limit: 1000, window: "60s", mode: "approx" }, name: "global" },
  ] as const;
  out.allHeaders = [(await rl.all(limits, { cost: 9 })).headers(), (await rl.all(limits, { cost: 2 })).headers()];
  // Periods of hours: keys expire on the server's real clock, and a key
  // of a 1 s rate would be gone before the look that follows on a slow machine.
  const path = [
    { key: "{org:7}:user:42", limit: 10, period: "1h", ceil: 50 },
    { key: "{org:7}", limit: 100, period: "1h" },
  ] as const;
  out.share = [plainAll(await rl.share(path)), plainAll(await rl.sharePeek(path))];
  out.peek = [
    plain(await rl.peek("g", { type: "gcra", limit: 100, period: "1m", burst: 20 })),
    plain(await rl.peek("nothing", { type: "fixed", limit: 3, window: "1m" })),
  ];
  const held = await rl.acquire("gpu", { limit: 1, ttl: "30s" });
  const full = await rl.acquire("gpu", { limit: 1, ttl: "30s" });
  const dry = await rl.acquire("gpu2", { limit: 2, ttl: "30s" }, { dryRun: true });
  assert.match(held.lease ?? "", /^[0-9a-f]{44}$/);
  out.acquire = [{ ...plain(held), lease: "held" }, plain(full), plain(dry)];
  out.lease = [
    await rl.renew("gpu", held.lease ?? "", "30s"),
    await rl.release("gpu", held.lease ?? ""),
    await rl.release("gpu", held.lease ?? ""),
    await rl.renew("gpu", held.lease ?? "", "30s"),
  ];
  out.throttle = [
    plain(await rl.throttle("user123", { maxBurst: 15, count: 30, periodSeconds: 60 })),
    plain(await rl.throttle("user123", { maxBurst: 15, count: 30, periodSeconds: 60, quantity: 16 })),
  ];
  // A wait the clock ends: the waiter blocks, the clock moves, it is admitted.
  await rl.gcra("w", { limit: 1, period: "1s" });
  out.waitDenied = plain(await rl.gcra("w", { limit: 1, period: "1s" }, { wait: "200ms" }));
  return out;
}

describe("typed calls", () => {
  const results: { name: string; out: Record<string, unknown> }[] = [];

  for (const kind of CLIENTS) {
    test(`every call with ${kind.name}`, async () => {
      const server = await Server.start({ policies: true });
      let client: OpenClient | undefined;
      try {
        client = await kind.open(server.url);
        const rl = new RateLimiter(client.redis);
        await rl.raw(["RL.CLOCK", "SET", String(START_US)]);
        const out = await script(rl);

        // Named policies, shadow mode and its sixth field.
        await rl.raw(["RL.POLICY", "SET", "plan:free", "FIXED", "3", "1m"]);
        await rl.raw(["RL.POLICY", "SET", "plan:shadow", "FIXED", "1", "1m", "SHADOW"]);
        out.check = [
          plain(await rl.check("user:42", ["cust:42", "plan:free"])),
          plain(await rl.check("user:43", ["plan:shadow"])),
          plain(await rl.check("user:43", ["plan:shadow"])),
          plain(await rl.check("user:44", ["plan:free"], { cost: 5, partial: true })),
        ];
        out.namedAll = plainAll(await rl.all([{ key: "{n}:1", policy: { type: "policy", name: "plan:free" } }]));

        // Errors: typed, the server's message kept whole.
        const bad = await rl.gcra("g", { limit: 10, period: "1s" }, { cost: -1 }).catch((e: unknown) => e);
        assert.ok(bad instanceof ReplyError);
        assert.equal(bad.code, "ERR");
        assert.equal(bad.command, "RL.GCRA");
        assert.equal(bad.message, "ERR COST must be an integer from 0 to 9223372036854775807");
        const wrong = await rl.bucket("g", { capacity: 10, refill: 1, period: "1s" }).catch((e: unknown) => e);
        assert.ok(wrong instanceof WrongTypeError);
        assert.equal(wrong.message, "WRONGTYPE key holds RL.GCRA state, not RL.BUCKET state");
        const period = await rl.gcra("x", { limit: 10, period: 0 }).catch((e: unknown) => e);
        assert.ok(period instanceof ReplyError);
        assert.match(period.message, /^ERR period must be a positive integer/);
        out.errors = [bad.message, wrong.message, period.message];
        results.push({ name: kind.name, out });
      } finally {
        await client?.close();
        await server.stop();
      }
    });
  }

  test("the values are the documented ones", () => {
    const first = results[0]?.out;
    assert.ok(first);
    const d = (allowed: boolean, limit: number, remaining: number, retry: number | null, reset: number, more: Plain = {}): Plain => ({
      allowed,
      limit,
      remaining,
      retryAfterMs: retry,
      resetAfterMs: reset,
      ...more,
    });
    assert.deepEqual(first.gcra, [d(true, 20, 19, null, 600), d(true, 20, 0, null, 12000), d(false, 20, 0, 600, 12000), d(false, 20, 0, 600, 12000)]);
    assert.deepEqual(first.gcraHeaders, {
      "ratelimit-policy": '"per-key";q=100;w=60',
      ratelimit: '"per-key";r=0;t=1',
      "retry-after": "1",
    });
    assert.deepEqual(first.reconcile, [
      d(true, 10000, 8000, null, 12000),
      d(true, 10000, 9500, null, 3000),
      d(false, 10000, 0, 3006, 63000),
      d(true, 10, 0, null, 1000, { granted: 10 }),
    ]);
    assert.deepEqual(first.bucket, [d(true, 100, 40, null, 6000), d(false, 100, 40, 2000, 6000)]);
    const sliding = first.sliding as Plain[];
    assert.deepEqual(sliding[0], d(true, 5, 4, null, 900000));
    assert.deepEqual(sliding[5], d(false, 5, 0, 900000, 900000));
    assert.deepEqual(sliding[6], d(true, 100, 5, null, 70000));
    assert.deepEqual(first.fixed, [d(true, 1000, 999, null, 86400000), d(true, 1000, 999, null, 86400000)]);
    assert.deepEqual(first.sketch, d(true, 100, 99, null, 120000));
    const all = first.all as Plain[];
    assert.deepEqual(all[0], { allowed: true, blockedBy: null, retryAfterMs: null, limits: [d(true, 10, 9, null, 100), d(true, 15, 14, null, 67)] });
    assert.deepEqual(all[2], {
      allowed: false,
      blockedBy: 0,
      retryAfterMs: 1000,
      limits: [d(false, 1, 0, 1000, 1000), d(true, 3, 1, null, 60000)],
    });
    assert.deepEqual((all[3]?.limits as Plain[])[1], d(true, 1048576, 748576, null, 60000));
    assert.deepEqual((all[4]?.limits as Plain[])[1], d(true, 5, 4, null, 30000, { lease: null }));
    assert.deepEqual(first.allHeaders, [
      { "ratelimit-policy": '"per-key";q=10;w=1, "global";q=1000;w=60', ratelimit: '"per-key";r=1;t=1, "global";r=991;t=60' },
      { "ratelimit-policy": '"per-key";q=10;w=1, "global";q=1000;w=60', ratelimit: '"per-key";r=1;t=1', "retry-after": "1" },
    ]);
    const share = first.share as Plain[];
    assert.deepEqual(share[0], { allowed: true, blockedBy: null, retryAfterMs: null, limits: [d(true, 10, 9, null, 360_000), d(true, 100, 99, null, 36_000)] });
    assert.deepEqual(share[1], share[0]);
    assert.deepEqual(first.peek, [d(false, 20, 0, 600, 12000), d(true, 3, 3, null, 0)]);
    assert.deepEqual(first.acquire, [
      d(true, 1, 0, null, 30000, { lease: "held" }),
      d(false, 1, 0, 30000, 30000, { lease: null }),
      d(true, 2, 1, null, 30000, { lease: null }),
    ]);
    assert.deepEqual(first.lease, [true, true, false, false]);
    assert.deepEqual(first.throttle, [d(true, 16, 15, null, 2000), d(false, 16, 15, 2000, 2000)]);
    assert.deepEqual(first.waitDenied, d(false, 1, 0, 1000, 1000));
    assert.deepEqual(first.check, [
      d(true, 3, 2, null, 60000),
      d(true, 1, 0, null, 60000, { shadowDenied: false }),
      d(true, 1, 0, 60000, 60000, { shadowDenied: true }),
      d(true, 3, 0, null, 60000, { granted: 3 }),
    ]);
  });

  test("RESP2 and RESP3, node-redis and ioredis parse to the same decisions", () => {
    assert.equal(results.length, CLIENTS.length);
    const [first, ...rest] = results;
    for (const other of rest) assert.deepEqual(other.out, first?.out, `${other.name} differs from ${first?.name}`);
  });
});

describe("client choice", () => {
  let server: Server;
  before(async () => {
    server = await Server.start();
  });
  after(async () => server.stop());

  test("a sendCommand function, node-redis and ioredis clients are all accepted", async () => {
    for (const kind of CLIENTS) {
      const client = await kind.open(server.url);
      try {
        const rl = new RateLimiter(client.redis);
        assert.equal(typeof (await rl.clock()), "bigint");
        const fn = new RateLimiter((args) => rl.sendCommand(args));
        assert.equal((await fn.gcra(`fn:${kind.name}`, { limit: 2, period: "1m" })).remaining, 1);
      } finally {
        await client.close();
      }
    }
  });
});
