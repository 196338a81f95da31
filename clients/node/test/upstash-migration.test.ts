// The move from @upstash/ratelimit, run: one express app "before", on the real
// @upstash/ratelimit (its own Lua scripts, evaluated by a redis-server), and the
// same app "after", on redis-ratelimit/upstash (only the import and the client
// changed), driven through one request sequence against one server with the
// module; statuses and the response fields (`success`, `limit`, `remaining`,
// `reset`, `reason`, carried in headers) compared, request by request. Every
// difference is asserted here exactly as the README's Upstash section states it.
//
// @upstash/ratelimit takes an @upstash/redis (REST) client, and its `Ratelimit`
// calls two of its methods: `evalsha(hash, keys, args)` and, after a NOSCRIPT,
// `eval(script, keys, args)` (its `dist/index.mjs`, 2.2.0: `safeEval`; analytics,
// `enableProtection` and dynamic limits, which call more, are off here).
// `UpstashOverRedis` below implements exactly those two over a node-redis
// connection. Its scripts open with `#!lua flags=allow-key-locking`, a flag
// redis-server 7 refuses (`ERR Unexpected flag in script shebang`): the adapter
// sends them with a bare `#!lua`, the body unchanged, and maps Upstash's hash to
// the server's.
//
// The server keeps real time (not `clock manual`): @upstash/ratelimit passes
// the process's `Date.now()` to its scripts, the module reads the server's
// clock, and both are this machine's clock. Windows are an hour long and every
// identifier starts fresh, so nothing refills during a run; a reset is checked
// to lie within what the run's own start and end times allow. A run that spans
// an hour boundary (windows aligned to the epoch) is run again with fresh
// identifiers: the second cannot span one.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import type { AddressInfo } from "node:net";
import { after, before, test } from "node:test";
import express from "express";
import { Ratelimit as UpstashRatelimit } from "@upstash/ratelimit";
import { Ratelimit } from "redis-ratelimit/upstash";
import { createClient } from "redis";
import { Server } from "./harness.js";

type NodeRedis = ReturnType<typeof createClient>;
type UpstashRedis = ConstructorParameters<typeof UpstashRatelimit>[0]["redis"];

const HOUR = 3_600_000;
const sha1 = (text: string): string => createHash("sha1").update(text).digest("hex");

/** The two methods @upstash/ratelimit's `Ratelimit` calls on its `redis`, over a node-redis connection. */
class UpstashOverRedis {
  /** Upstash's hash of a script → the hash of the script as the server runs it. */
  private readonly hashes = new Map<string, string>();

  constructor(private readonly client: NodeRedis) {}

  async evalsha(hash: string, keys: readonly string[], args: readonly unknown[]): Promise<unknown> {
    // Not yet seen: NOSCRIPT, as a server would answer, and the library sends the script.
    const own = this.hashes.get(hash) ?? hash;
    return this.client.sendCommand(["EVALSHA", own, String(keys.length), ...keys, ...args.map(String)]);
  }

  async eval(script: string, keys: readonly string[], args: readonly unknown[]): Promise<unknown> {
    const runnable = script.replace(/^#!lua flags=allow-key-locking/, "#!lua");
    this.hashes.set(sha1(script), sha1(runnable));
    return this.client.sendCommand(["EVAL", runnable, String(keys.length), ...keys, ...args.map(String)]);
  }
}

/** What both packages answer, as the app reads it. */
interface Answer {
  readonly success: boolean;
  readonly limit: number;
  readonly remaining: number;
  readonly reset: number;
  readonly reason?: string;
}

/** What one response says. */
interface Seen {
  readonly status: number;
  readonly limit: number;
  readonly remaining: number;
  readonly reset: number;
  readonly reason: string | null;
}

/** The app, the same before and after: a rate limit per `?user=`, its fields in headers. */
function app(ratelimit: { limit(identifier: string): Promise<Answer> }): express.Express {
  const a = express();
  a.use(async (req, res, next) => {
    const { success, limit, remaining, reset, reason } = await ratelimit.limit(String(req.query.user));
    res.set({ "X-RateLimit-Limit": String(limit), "X-RateLimit-Remaining": String(remaining), "X-RateLimit-Reset": String(reset) });
    if (reason !== undefined) res.set("X-RateLimit-Reason", reason);
    if (!success) {
      res.status(429).send("Too many requests");
      return;
    }
    next();
  });
  a.get("/", (_req, res) => void res.send("ok"));
  // An error handler (express knows one by its four parameters): the error's message, unlogged.
  // eslint-disable-next-line @typescript-eslint/no-unused-vars -- the fourth parameter marks it
  a.use((error: Error, _req: express.Request, res: express.Response, _next: express.NextFunction) => void res.status(500).send(error.message));
  return a;
}

/** A run: every response, and the real time it started and ended. */
interface Run {
  readonly seen: Seen[];
  /** The bodies of 500 answers: the errors the app met. */
  readonly errors: string[];
  readonly start: number;
  readonly end: number;
}

async function drive(ratelimit: { limit(identifier: string): Promise<Answer> }, users: readonly string[]): Promise<Run> {
  const a = app(ratelimit);
  const listener = await new Promise<ReturnType<typeof a.listen>>((ok) => {
    const s = a.listen(0, "127.0.0.1", () => ok(s));
  });
  const { port } = listener.address() as AddressInfo;
  try {
    const seen: Seen[] = [];
    const errors: string[] = [];
    const start = Date.now();
    for (const user of users) {
      const r = await fetch(`http://127.0.0.1:${port}/?user=${user}`);
      const body = await r.text();
      if (r.status === 500) errors.push(body);
      const n = (h: string): number => Number(r.headers.get(h));
      seen.push({ status: r.status, limit: n("x-ratelimit-limit"), remaining: n("x-ratelimit-remaining"), reset: n("x-ratelimit-reset"), reason: r.headers.get("x-ratelimit-reason") });
    }
    return { seen, errors, start, end: Date.now() };
  } finally {
    await new Promise<void>((ok) => {
      listener.close(() => ok());
      listener.closeAllConnections();
    });
  }
}

let server: Server;
let client: NodeRedis;
before(async () => {
  server = await Server.start({ manualClock: false });
  client = createClient({ url: server.url });
  client.on("error", () => undefined);
  await client.connect();
});
after(async () => {
  client.destroy();
  await server.stop();
});

// Three identifiers, a limit of 3: a and b cross it, c does not; after its first denial an identifier
// is answered by the ephemeral cache (on by default in both).
const USERS = ["a", "a", "b", "a", "a", "c", "b", "a", "b", "b", "b"];
const STATUSES = [200, 200, 200, 200, 429, 200, 200, 429, 200, 429, 429];
const REMAINING = [2, 1, 2, 0, 0, 2, 1, 0, 0, 0, 0];
const REASONS = [null, null, null, null, null, null, null, "cacheBlock", null, null, "cacheBlock"];

/** Per request: how many of its identifier's requests were admitted, this one included. */
const ADMITTED = USERS.map((u, i) => USERS.slice(0, i + 1).filter((v, j) => v === u && STATUSES[j] === 200).length);

/** The reset a response may carry, as a function of when the run's events happened (`t` within the run). */
type Expected = (t: number, i: number) => number;

interface Case {
  readonly name: string;
  readonly before: (prefix: string) => UpstashRatelimit;
  readonly after: (prefix: string) => Ratelimit;
  /** @upstash/ratelimit's reset. */
  readonly upstashReset: Expected;
  /** redis-ratelimit's reset: the difference the README states. */
  readonly ownReset: Expected;
  /** Upstash's keys are in the module's way (the token bucket's, under `<prefix>:<id>`): deleted between the runs. */
  readonly clash?: boolean;
}

const windowEnd = (t: number): number => (Math.floor(t / HOUR) + 1) * HOUR;
const admitted = (i: number): boolean => STATUSES[i] === 200;

const CASES: readonly Case[] = [
  {
    // Both: the end of the aligned window, admitted or denied. No difference.
    name: "fixedWindow(3, '1 h')",
    before: (prefix) => new UpstashRatelimit({ redis: new UpstashOverRedis(client) as unknown as UpstashRedis, limiter: UpstashRatelimit.fixedWindow(3, "1 h"), prefix }),
    after: (prefix) => new Ratelimit({ redis: client, limiter: Ratelimit.fixedWindow(3, "1 h"), prefix }),
    upstashReset: windowEnd,
    ownReset: windowEnd,
  },
  {
    // Upstash: the end of the current window. Here: admitted, when the estimate no longer weighs this
    // window's count (the end of the next window); denied, when the estimate first admits (3 counted in
    // this window weigh 3 × (1 − elapsed fraction) in the next: a third of a window into it).
    name: "slidingWindow(3, '1 h')",
    before: (prefix) => new UpstashRatelimit({ redis: new UpstashOverRedis(client) as unknown as UpstashRedis, limiter: UpstashRatelimit.slidingWindow(3, "1 h"), prefix }),
    after: (prefix) => new Ratelimit({ redis: client, limiter: Ratelimit.slidingWindow(3, "1 h"), prefix }),
    upstashReset: windowEnd,
    ownReset: (t, i) => windowEnd(t) + (admitted(i) ? HOUR : HOUR / 3),
  },
  {
    // Upstash: its next refill (2 tokens at once), an interval after the identifier's first request.
    // Here the refill is continuous, a token every half hour from the first charge: admitted, when the
    // bucket is full again (the admitted count × half an hour); denied, when one token is back.
    name: "tokenBucket(2, '1 h', 3)",
    before: (prefix) => new UpstashRatelimit({ redis: new UpstashOverRedis(client) as unknown as UpstashRedis, limiter: UpstashRatelimit.tokenBucket(2, "1 h", 3), prefix }),
    after: (prefix) => new Ratelimit({ redis: client, limiter: Ratelimit.tokenBucket(2, "1 h", 3), prefix }),
    upstashReset: (t) => t + HOUR,
    ownReset: (t, i) => t + (admitted(i) ? ADMITTED[i]! * (HOUR / 2) : HOUR / 2),
    clash: true,
  },
];

/**
 * Every reset of `run` within what `expected` gives at the run's start and end (1 ms of rounding either
 * side), later by up to `skew` ms.
 */
function resetsWithin(run: Run, expected: Expected, skew: number): string[] {
  return run.seen.flatMap((s, i) => {
    const lo = expected(run.start, i) - 1;
    const hi = expected(run.end, i) + skew + 1;
    return s.reset >= lo && s.reset <= hi ? [] : [`request ${i}: reset ${s.reset} not in [${lo}, ${hi}]`];
  });
}

/** Whether a run stayed inside one aligned hour. */
const oneWindow = (run: Run): boolean => Math.floor(run.start / HOUR) === Math.floor(run.end / HOUR);

for (const c of CASES) {
  test(`from @upstash/ratelimit, ${c.name}: the same statuses, limits and remaining; resets as documented`, async () => {
    for (let attempt = 0; ; attempt++) {
      const prefix = `mig${attempt}`;
      const users = USERS.map((u) => `${c.name.slice(0, 5)}-${u}`);
      const upstash = c.before(prefix);
      const own = c.after(prefix);
      const beforeRun = await drive(upstash, users);
      if (c.clash === true) {
        // The old hashes go, as when moving over (the last test shows what happens when they stay).
        const old = [...new Set(users)].map((u) => `${prefix}:${u}`);
        assert.deepEqual(await Promise.all(old.map((k) => client.type(k))), old.map(() => "hash"));
        await client.del(old);
      }
      const afterRun = await drive(own, users).finally(() => own.close());
      if (!(oneWindow(beforeRun) && oneWindow(afterRun))) {
        assert.ok(attempt < 1, "two runs each spanned an hour boundary");
        continue;
      }
      for (const run of [beforeRun, afterRun]) {
        assert.deepEqual(
          run.seen.map((s) => s.status),
          STATUSES,
        );
        assert.deepEqual(
          run.seen.map((s) => s.limit),
          USERS.map(() => 3),
        );
        assert.deepEqual(
          run.seen.map((s) => s.remaining),
          REMAINING,
        );
        assert.deepEqual(
          run.seen.map((s) => s.reason),
          REASONS,
        );
      }
      // Upstash's reset is this process's Date.now() arithmetic, exact; the module's is the server's
      // relative time added to Date.now() when the reply is read: later by up to the time in between.
      assert.deepEqual(resetsWithin(beforeRun, c.upstashReset, 0), []);
      assert.deepEqual(resetsWithin(afterRun, c.ownReset, afterRun.end - afterRun.start), []);
      // A cached denial carries the reset of the denial that filled the cache: Upstash's the same number;
      // here the same time, read again on this process's clock (within the run's span).
      for (const [run, skew] of [
        [beforeRun, 0],
        [afterRun, afterRun.end - afterRun.start],
      ] as const) {
        assert.ok(Math.abs(run.seen[7]!.reset - run.seen[4]!.reset) <= skew);
        assert.ok(Math.abs(run.seen[10]!.reset - run.seen[9]!.reset) <= skew);
      }
      return;
    }
  });
}

test("from @upstash/ratelimit: the keys of both on one server", async () => {
  const prefix = "keys";
  const upstash = new UpstashRatelimit({ redis: new UpstashOverRedis(client) as unknown as UpstashRedis, limiter: UpstashRatelimit.fixedWindow(3, "1 h"), prefix });
  const beforeRun = await drive(upstash, ["x"]);
  const window = Math.floor(beforeRun.start / HOUR);
  const own = new Ratelimit({ redis: client, limiter: Ratelimit.fixedWindow(3, "1 h"), prefix });
  await drive(own, ["x"]).finally(() => own.close());
  // Upstash keeps a key per window (`<prefix>:<id>:<window number>`), the module one per identifier:
  // the counts are not carried over, and the two never collide.
  const keys = (await client.keys(`${prefix}:*`)).sort();
  // Upstash's scripts ran by hash once loaded (EVALSHA), as against Upstash.
  assert.match(await client.info("commandstats"), /cmdstat_evalsha:calls=[1-9]/);
  if (oneWindow(beforeRun)) assert.deepEqual(keys, [`${prefix}:x`, `${prefix}:x:${window}`]);

  // The token bucket: Upstash's is a hash under `<prefix>:<id>`, the very key the module uses, so while
  // it lives (until Upstash's bucket would be full again) the after-app's request on that identifier
  // fails with WRONGTYPE (express answers 500); removing the old keys lets the module start afresh.
  const bucketBefore = new UpstashRatelimit({ redis: new UpstashOverRedis(client) as unknown as UpstashRedis, limiter: UpstashRatelimit.tokenBucket(2, "1 h", 3), prefix });
  await drive(bucketBefore, ["y"]);
  assert.equal(await client.type(`${prefix}:y`), "hash");
  const bucketAfter = new Ratelimit({ redis: client, limiter: Ratelimit.tokenBucket(2, "1 h", 3), prefix });
  try {
    const clash = await drive(bucketAfter, ["y"]);
    assert.equal(clash.seen[0]!.status, 500);
    assert.match(clash.errors[0]!, /^WRONGTYPE /);
    await client.del(`${prefix}:y`);
    const fresh = await drive(bucketAfter, ["y"]);
    assert.deepEqual([fresh.seen[0]!.status, fresh.seen[0]!.remaining], [200, 2]);
  } finally {
    bucketAfter.close();
  }
});
