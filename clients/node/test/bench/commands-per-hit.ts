// Commands per hit through express-rate-limit: this package's store beside
// rate-limit-redis (express-rate-limit's Redis store), on one server in
// the same run, counted by the server (INFO commandstats, which counts the
// commands a script runs too). Measured, not asserted.
import type { AddressInfo } from "node:net";
import express from "express";
import { type Store, rateLimit } from "express-rate-limit";
import { RedisStore } from "rate-limit-redis";
import { createClient } from "redis";
import { RedisRateLimitStore } from "redis-ratelimit/express";
import { Server } from "../harness.js";

const HITS = Number(process.env.HITS ?? 200);
const LIMIT = 100;

async function commandCalls(send: (args: string[]) => Promise<unknown>): Promise<Map<string, number>> {
  const info = String(await send(["INFO", "commandstats"]));
  const calls = new Map<string, number>();
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) calls.set(m[1] ?? "", Number(m[2]));
  calls.delete("info");
  calls.delete("config|resetstat");
  return calls;
}

async function run(name: string, store: Store, send: (args: string[]) => Promise<unknown>): Promise<void> {
  const app = express();
  app.use(rateLimit({ windowMs: 60_000, limit: LIMIT, store, standardHeaders: "draft-8", legacyHeaders: false }));
  app.get("/", (_req, res) => void res.send("ok"));
  const server = await new Promise<ReturnType<typeof app.listen>>((ok) => {
    const s = app.listen(0, "127.0.0.1", () => ok(s));
  });
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  await fetch(url); // the store's first hit (rate-limit-redis loads its scripts)
  await send(["CONFIG", "RESETSTAT"]);
  const codes: number[] = [];
  for (let i = 0; i < HITS; i++) codes.push((await fetch(url)).status);
  const calls = await commandCalls(send);
  const total = [...calls.values()].reduce((a, b) => a + b, 0);
  const detail = [...calls].map(([c, n]) => `${c}=${(n / HITS).toFixed(2)}`).join(" ");
  const admitted = codes.filter((c) => c === 200).length;
  console.log(`${name.padEnd(22)} ${(total / HITS).toFixed(2)} server commands/hit (${detail}); ${admitted} of ${HITS} admitted`);
  server.closeAllConnections();
  server.close();
}

async function main(): Promise<void> {
  const redis = await Server.start({ manualClock: false });
  const client = createClient({ url: redis.url });
  await client.connect();
  const send = (args: string[]): Promise<unknown> => client.sendCommand(args);
  try {
    console.log(`${HITS} sequential hits on one key, limit ${LIMIT} per minute (express-rate-limit, one server):`);
    await run("redis-ratelimit store", new RedisRateLimitStore({ sendCommand: (...args: string[]) => client.sendCommand(args), prefix: "a:" }), send);
    await run("rate-limit-redis", new RedisStore({ sendCommand: (...args: string[]) => client.sendCommand(args), prefix: "b:" }), send);
  } finally {
    client.destroy();
    await redis.stop();
  }
}

await main();
