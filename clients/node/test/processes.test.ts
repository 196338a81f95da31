// Three OS processes on one key, each its own Node process (`fork()` of
// `procs/worker.js`) with its own connection, node-redis and ioredis:
//
// - block leasing on a refilling (real) clock: the commands per admission
//   (counted by the server, INFO commandstats) and every 1 s window's
//   admissions against the documented bound (the limit's rate and burst
//   plus a block per process);
// - degraded mode: the server frozen (SIGSTOP) for 10 s while the three
//   send seeded Poisson traffic at uneven rates; each admits its observed
//   share of the limit within ±20 %.
//
// On a loaded machine: the workers start and stop at epoch instants the
// parent sets (a slow start shortens no one's run); arrivals are scheduled
// at fixed instants from the seed, and a late timer sends the requests due
// meanwhile at once; the bounds are upper bounds, which a descheduled
// process only moves away from; the degraded shares are compared with what
// each process admitted over the outage's measured length.
import assert from "node:assert/strict";
import { type ChildProcess, fork } from "node:child_process";
import { dirname, join } from "node:path";
import { describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { Server } from "./harness.js";
import type { Go, Job, Report } from "./procs/worker.js";

const WORKER = join(dirname(fileURLToPath(import.meta.url)), "procs", "worker.js");
const LIBRARIES = ["node-redis", "ioredis"] as const;
const now = (): number => performance.timeOrigin + performance.now();
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, Math.max(0, ms)));

/** A worker process running `job`: `ready` once connected, `report` at its end (bounded by `limitMs`). */
function start(job: Job, limitMs: number): { child: ChildProcess; ready: Promise<void>; go: (go: Go) => void; share: () => Promise<number | undefined>; report: Promise<Report> } {
  const child = fork(WORKER, [], { stdio: ["ignore", "inherit", "inherit", "ipc"] });
  let ready = (): void => undefined;
  const readyP = new Promise<void>((r) => (ready = r));
  let shareReply: (share: number | undefined) => void = () => undefined;
  const report = new Promise<Report>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`worker did not report within ${limitMs} ms`));
    }, limitMs);
    child.on("message", (m: "ready" | { report: Report } | { error: string } | { share: number | undefined }) => {
      if (m === "ready") ready();
      else if ("share" in m) shareReply(m.share);
      else {
        clearTimeout(timer);
        if ("report" in m) resolve(m.report);
        else reject(new Error(m.error));
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`worker exited with ${code}`));
    });
  });
  report.catch(() => undefined);
  child.send(job);
  const share = (): Promise<number | undefined> =>
    new Promise((r) => {
      shareReply = r;
      child.send({ share: true });
    });
  return { child, ready: readyP, go: (go) => child.send({ go }), share, report };
}

/** `RL.*` decision commands the server ran, from INFO commandstats. */
async function decisionCommands(url: string): Promise<number> {
  const { createClient } = await import("redis");
  const c = createClient({ url });
  await c.connect();
  try {
    const text = await c.sendCommand(["INFO", "commandstats"]);
    let calls = 0;
    for (const m of String(text).matchAll(/^cmdstat_(rl\.[a-z.]+):calls=(\d+)/gim)) calls += Number(m[2]);
    return calls;
  } finally {
    c.destroy();
  }
}

async function command(url: string, args: string[]): Promise<unknown> {
  const { createClient } = await import("redis");
  const c = createClient({ url });
  await c.connect();
  try {
    return await c.sendCommand(args);
  } finally {
    c.destroy();
  }
}

/** The most admissions in any window of `ms` over the sorted instants `at`. */
function busiest(at: number[], ms: number): number {
  let most = 0;
  for (let i = 0, j = 0; j < at.length; j++) {
    while ((at[j] ?? 0) - (at[i] ?? 0) >= ms) i++;
    most = Math.max(most, j - i + 1);
  }
  return most;
}

const LEASE = { limit: 2000, period: "1s", block: 20, queue: 1000, run: 4000 } as const;

describe("3 processes: block leasing on one key, refilling clock", () => {
  for (const library of LIBRARIES) {
    test(library, async (t) => {
      const server = await Server.start({ manualClock: false });
      try {
        const inFlight = [50, 30, 10];
        const jobs = inFlight.map((n, i): Job => ({ kind: "lease", client: library, url: server.url, key: "shared", limit: LEASE.limit, period: LEASE.period, block: LEASE.block, queue: LEASE.queue, inFlight: n, seed: 11 + i }));
        // Bounded: each worker reports within 60 s of its start (a loaded machine starts Node slowly), else it is killed.
        const workers = jobs.map((job) => start(job, 60_000));
        await Promise.all(workers.map((w) => w.ready));
        await command(server.url, ["CONFIG", "RESETSTAT"]);
        // Every worker connected: they start together, 300 ms from now.
        const startAt = now() + 300;
        for (const w of workers) w.go({ startAt, stopAt: startAt + LEASE.run });
        const reports = await Promise.all(workers.map((w) => w.report));
        const commands = await decisionCommands(server.url);
        const admitted = reports.map((r) => r.admittedAt.length);
        const total = admitted.reduce((a, b) => a + b, 0);
        const all = reports.flatMap((r) => r.admittedAt).sort((a, b) => a - b);
        const worst = busiest(all, 1000);
        // The documented bound: the limit's rate over 1 s, its burst (the limit) and a block held by each process.
        const bound = LEASE.limit + LEASE.limit + LEASE.block * 3;
        const perAdmission = commands / total;
        // The time the server was asked: from the start to the last admission (calls in flight at the stop, or
        // queued for a block, land after it).
        const askedMs = Math.max(LEASE.run, (all[all.length - 1] ?? startAt) - startAt);
        t.diagnostic(
          JSON.stringify({ library, processes: 3, inFlight, runMs: LEASE.run, policy: "GCRA 2000 1s", block: LEASE.block, queue: LEASE.queue, admitted, total, askedMs: Math.round(askedMs), commands, perAdmission: Number(perAdmission.toFixed(4)), busiest1s: worst, bound, leaseCommands: reports.map((r) => r.commands), errors: reports.map((r) => r.errors) }),
        );
        for (const r of reports) assert.equal(r.errors, 0);
        assert.ok(worst <= bound, `${worst} admitted in 1 s, bound ${bound}`);
        // Over the whole run: the burst, the rate over the time the server was asked, the blocks held.
        assert.ok(total <= LEASE.limit + (LEASE.limit * askedMs) / 1000 + LEASE.block * 3, `${total} admitted in ${askedMs.toFixed(0)} ms`);
        // The key was contended all along: most of what the rate allows was admitted.
        assert.ok(total >= (LEASE.limit * LEASE.run) / 1000 / 2, `${total} admitted`);
        assert.ok(perAdmission <= 0.055, `${perAdmission} commands per admission`);
      } finally {
        await server.stop();
      }
    });
  }
});

const DEGRADED = { limit: 100, period: "1s", rates: [40, 120, 240], warmMs: 5000, outageMs: 10_000 } as const;

describe("3 processes: degraded mode at uneven rates, the server frozen 10 s", () => {
  for (const library of LIBRARIES) {
    test(library, async (t) => {
      const server = await Server.start({ manualClock: false });
      try {
        const jobs = DEGRADED.rates.map((rate, i): Job => ({ kind: "degraded", client: library, url: server.url, key: "shared", limit: DEGRADED.limit, period: DEGRADED.period, rate, seed: 101 + i }));
        const workers = jobs.map((job) => start(job, 80_000));
        await Promise.all(workers.map((w) => w.ready));
        const startAt = now() + 300;
        const downAt = startAt + DEGRADED.warmMs;
        const upAt = downAt + DEGRADED.outageMs;
        const stopAt = upAt + 500;
        for (const w of workers) w.go({ startAt, stopAt });
        await sleep(downAt - now());
        const shares = await Promise.all(workers.map((w) => w.share()));
        const frozenAt = now();
        server.pause();
        await sleep(upAt - now());
        const thawedAt = now();
        server.resume();
        const reports = await Promise.all(workers.map((w) => w.report));
        const seconds = (thawedAt - frozenAt) / 1000;
        // Requests sent while the server was frozen.
        const during = reports.map((r) => r.sent.filter(([at]) => at >= frozenAt && at < thawedAt));
        const offered = during.map((d) => d.length);
        const admitted = during.map((d) => d.filter(([, ok]) => ok === 1).length);
        const share = shares.map((s) => s ?? 0);
        const expected = share.map((s, i) => Math.min(offered[i] ?? 0, s * DEGRADED.limit * seconds));
        const ratio = admitted.map((a, i) => a / (expected[i] ?? 1));
        const demandShare = DEGRADED.rates.map((r) => r / DEGRADED.rates.reduce((a, b) => a + b, 0));
        t.diagnostic(
          JSON.stringify({ library, rates: DEGRADED.rates, policy: "GCRA 100 1s", seconds: Number(seconds.toFixed(2)), shares: share.map((s) => Number(s.toFixed(3))), demandShare: demandShare.map((s) => Number(s.toFixed(3))), offered, admitted, expected: expected.map(Math.round), ratio: ratio.map((r) => Number(r.toFixed(3))), errors: reports.map((r) => r.errors) }),
        );
        for (const r of reports) assert.equal(r.errors, 0);
        for (const [i, r] of ratio.entries()) assert.ok(r >= 0.8 && r <= 1.2, `process ${i}: ${admitted[i]} admitted, ${expected[i]} expected`);
        // The shares are of one limit: together about all of it.
        const sum = share.reduce((a, b) => a + b, 0);
        assert.ok(sum >= 0.8 && sum <= 1.2, `shares sum to ${sum}`);
      } finally {
        server.resume();
        await server.stop();
      }
    });
  }
});
