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

async function cpuPerCall(label: string, call: () => Promise<unknown>, n = N): Promise<number> {
  for (let i = 0; i < Math.min(2000, n); i++) await call(); // warm-up
  const start = process.cpuUsage();
  for (let i = 0; i < n; i++) await call();
  const used = process.cpuUsage(start);
  const us = (used.user + used.system) / n;
  console.log(`  ${label.padEnd(44)} ${us.toFixed(2)} µs CPU/call`);
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
      const rl = new RateLimiter(client);
      console.log(`node-redis RESP${RESP}, real server:`);
      const raw = await cpuPerCall("client.sendCommand([...])", () => client.sendCommand(["RL.GCRA", "k", "1000000", "1s"]));
      const typed = await cpuPerCall("rl.gcra(...)", () => rl.gcra("k", { limit: 1_000_000, period: "1s" }));
      console.log(`  typed - raw: ${(typed - raw).toFixed(2)} µs`);
      client.destroy();
      const io = new Redis(server.url, { protocol: RESP });
      const iorl = new RateLimiter(io);
      console.log(`ioredis RESP${RESP}, real server:`);
      const ioraw = await cpuPerCall("client.call(...)", () => io.call("RL.GCRA", "k", "1000000", "1s"));
      const iotyped = await cpuPerCall("rl.gcra(...)", () => iorl.gcra("k", { limit: 1_000_000, period: "1s" }));
      console.log(`  typed - raw: ${(iotyped - ioraw).toFixed(2)} µs`);
      io.disconnect();
    }
  } finally {
    await server.stop();
  }
}

await main();
