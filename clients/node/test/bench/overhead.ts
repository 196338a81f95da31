// A typed call's client CPU beside the raw command (measured, not
// asserted). Two shapes, each typed against raw in the same run:
//  1. in process: a sendCommand that answers a canned reply at once, so
//     only what the package adds is measured (building the words, parsing);
//  2. over a real server: sequential calls on one connection, process CPU
//     per call (the client library's own work included).
import { createClient } from "redis";
import { Redis } from "ioredis";
import { RateLimiter, type SendCommand } from "redis-ratelimit";
import { Server } from "../harness.js";

const N = Number(process.env.N ?? 20_000);

const ROUNDS = 9;

async function cpuPerCall(label: string, call: () => Promise<unknown>, n = N, print = true): Promise<number> {
  for (let i = 0; i < Math.min(2000, n); i++) await call(); // warm-up
  const start = process.cpuUsage();
  for (let i = 0; i < n; i++) await call();
  const used = process.cpuUsage(start);
  const us = (used.user + used.system) / n;
  if (print) console.log(`  ${label.padEnd(44)} ${us.toFixed(2)} µs CPU/call`);
  return us;
}

async function main(): Promise<void> {
  console.log(`client CPU per call, ${N} sequential calls each (node ${process.version})`);
  for (const [protocol, reply] of [
    ["RESP2", [1, 10, 9, -1, 100]],
    ["RESP3", { allowed: true, limit: 10, remaining: 9, retry_after_ms: -1, reset_after_ms: 100 }],
  ] as const) {
    const canned: SendCommand = () => Promise.resolve(reply);
    const rl = new RateLimiter(canned);
    console.log(`in process, canned ${protocol} reply:`);
    const raw = await cpuPerCall("raw sendCommand([...])", () => canned(["RL.GCRA", "k", "10", "1s"]));
    const typed = await cpuPerCall("rl.gcra(k, { limit: 10, period: '1s' })", () => rl.gcra("k", { limit: 10, period: "1s" }));
    const withHeaders = await cpuPerCall("... and decision.headers()", async () => (await rl.gcra("k", { limit: 10, period: "1s" })).headers());
    console.log(`  added by the typed call: ${(typed - raw).toFixed(2)} µs; with headers: ${(withHeaders - raw).toFixed(2)} µs`);
  }
  const server = await Server.start();
  try {
    for (const RESP of [2, 3] as const) {
      const client = createClient({ url: server.url, RESP });
      await client.connect();
      const io = new Redis(server.url, { protocol: RESP });
      const [rl, iorl] = [new RateLimiter(client), new RateLimiter(io)];
      const shapes: [string, () => Promise<unknown>, () => Promise<unknown>][] = [
        [`node-redis RESP${RESP}`, () => client.sendCommand(["RL.GCRA", "k", "1000000", "1s"]), () => rl.gcra("k", { limit: 1_000_000, period: "1s" })],
        [`ioredis RESP${RESP}`, () => io.call("RL.GCRA", "k", "1000000", "1s"), () => iorl.gcra("k", { limit: 1_000_000, period: "1s" })],
      ];
      for (const [name, raw, typed] of shapes) {
        // Raw and typed alternate in rounds, so that load changes hit both; the median round counts.
        console.log(`${name}, real server, ${ROUNDS} alternating rounds of ${N / ROUNDS}:`);
        const diffs: number[] = [];
        for (let r = 0; r < ROUNDS; r++) {
          const a = await cpuPerCall("raw", raw, N / ROUNDS, false);
          const b = await cpuPerCall("typed", typed, N / ROUNDS, false);
          diffs.push(b - a);
        }
        diffs.sort((x, y) => x - y);
        console.log(`  typed - raw, median of rounds: ${(diffs[Math.floor(ROUNDS / 2)] ?? 0).toFixed(2)} µs (rounds: ${diffs.map((d) => d.toFixed(1)).join(", ")})`);
      }
      client.destroy();
      io.disconnect();
    }
  } finally {
    await server.stop();
  }
}

await main();
