// One OS process of the multi-process tests (`processes.test.ts`), started
// with `fork()`: it opens its own connection (node-redis or ioredis), waits
// for the parent's `go` and runs the traffic the parent describes, then
// reports what it admitted. Times are epoch ms on the machine's one clock
// (`performance.timeOrigin + performance.now()`), so the processes'
// records can be laid side by side.
import { createClient } from "redis";
import { Redis } from "ioredis";
import { type Duration, LeasedLimit, RateLimiter, type RedisLike } from "redis-ratelimit";

/** What the parent asks a worker to do. */
export type Job =
  | {
      readonly kind: "lease";
      readonly client: "node-redis" | "ioredis";
      readonly url: string;
      readonly key: string;
      readonly limit: number;
      readonly period: Duration;
      readonly block: number;
      /** Queue for whole blocks on the server while the key is contended, waiting up to this long (ms). */
      readonly queue?: number;
      /** Closed loops: requests in flight. */
      readonly inFlight: number;
      readonly seed: number;
    }
  | {
      readonly kind: "degraded";
      readonly client: "node-redis" | "ioredis";
      readonly url: string;
      readonly key: string;
      readonly limit: number;
      readonly period: Duration;
      /** Poisson arrivals a second (open loop). */
      readonly rate: number;
      readonly seed: number;
    };

/** What a worker reports at the end. */
export interface Report {
  /** Epoch ms of each admission (lease), or of each request sent with whether it was admitted (degraded). */
  readonly admittedAt: number[];
  readonly sent: [at: number, allowed: 0 | 1][];
  /** Commands the lease sent (block calls and refunds). */
  readonly commands: number;
  /** Degraded mode's share of the key, read when the parent asked (`share`). */
  readonly share: number | undefined;
  readonly errors: number;
}

/** When to run: epoch ms at which to start and to stop. */
export interface Go {
  readonly startAt: number;
  readonly stopAt: number;
}

/** The parent's messages after the job: `go` once every worker is connected, `share` (read the degraded share now). */
export type Message = { readonly go: Go } | { readonly share: true };

const now = (): number => performance.timeOrigin + performance.now();
const sleepUntil = (at: number): Promise<void> => new Promise((r) => setTimeout(r, Math.max(0, at - now())));

/** A seeded PRNG (mulberry32), uniform in [0, 1). */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

async function open(kind: "node-redis" | "ioredis", url: string): Promise<{ redis: RedisLike; close(): void }> {
  if (kind === "ioredis") {
    const c = new Redis(url, { lazyConnect: true, enableOfflineQueue: false, autoResendUnfulfilledCommands: false });
    c.on("error", () => undefined);
    await c.connect();
    return { redis: c, close: () => void c.disconnect() };
  }
  const c = createClient({ url });
  c.on("error", () => undefined);
  await c.connect();
  return { redis: c, close: () => void c.destroy() };
}

async function lease(job: Extract<Job, { kind: "lease" }>, go: Promise<Go>): Promise<Report> {
  const client = await open(job.client, job.url);
  const limiter = new RateLimiter(client.redis, { timeout: 2000 });
  const policy = { type: "gcra", limit: job.limit, period: job.period } as const;
  const leased = new LeasedLimit(limiter, job.key, policy, { block: job.block, ...(job.queue === undefined ? {} : { queue: job.queue }) });
  const rand = random(job.seed);
  const admittedAt: number[] = [];
  let errors = 0;
  process.send?.("ready");
  const { startAt, stopAt } = await go;
  await sleepUntil(startAt);
  await Promise.all(
    Array.from({ length: job.inFlight }, async () => {
      while (now() < stopAt) {
        try {
          const d = await leased.acquire({ timeout: 2000 });
          if (d.allowed) admittedAt.push(now());
          // A client told to come back later does, a little after (seeded jitter): never past the run's end.
          else await sleepUntil(Math.min(stopAt, now() + (d.retryAfterMs ?? 1) * (1 + rand() / 2)));
        } catch {
          errors++;
        }
      }
    }),
  );
  await leased.release();
  limiter.close();
  client.close();
  return { admittedAt, sent: [], commands: leased.commands, share: undefined, errors };
}

async function degraded(job: Extract<Job, { kind: "degraded" }>, go: Promise<Go>, shareAsked: Promise<void>): Promise<Report> {
  const client = await open(job.client, job.url);
  const limiter = new RateLimiter(client.redis, { timeout: 300, fallback: "closed", degraded: 100 });
  const policy = { type: "gcra", limit: job.limit, period: job.period } as const;
  const rand = random(job.seed);
  const sent: [number, 0 | 1][] = [];
  const pending: Promise<void>[] = [];
  let share: number | undefined;
  let errors = 0;
  void shareAsked.then(() => {
    share = limiter.degradedShare(job.key, policy);
    process.send?.({ share });
  });
  process.send?.("ready");
  const { startAt, stopAt } = await go;
  // Open-loop Poisson arrivals at fixed instants from the seed: a late timer sends the requests due meanwhile at once.
  let at = startAt;
  for (;;) {
    at += (-Math.log(1 - rand()) * 1000) / job.rate;
    if (at >= stopAt) break;
    await sleepUntil(at);
    const sentAt = at;
    pending.push(
      limiter.decide(job.key, policy).then(
        (d) => void sent.push([sentAt, d.allowed ? 1 : 0]),
        () => void errors++,
      ),
    );
  }
  await Promise.all(pending);
  limiter.close();
  client.close();
  return { admittedAt: [], sent, commands: 0, share, errors };
}

process.once("message", (job: Job) => {
  let askShare = (): void => undefined;
  const shareAsked = new Promise<void>((r) => (askShare = r));
  let started: (go: Go) => void = () => undefined;
  const go = new Promise<Go>((r) => (started = r));
  process.on("message", (m: Message) => {
    if ("share" in m) askShare();
    else started(m.go);
  });
  const run = job.kind === "lease" ? lease(job, go) : degraded(job, go, shareAsked);
  run.then(
    (report) => process.send?.({ report }, () => process.exit(0)),
    (error: unknown) => process.send?.({ error: String(error) }, () => process.exit(1)),
  );
});
