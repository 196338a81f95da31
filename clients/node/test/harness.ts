// Real redis-server processes with the module loaded, on free loopback
// ports, each in a temporary directory, for the node:test suites.
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { createServer, connect } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { after, before } from "node:test";
import { fileURLToPath } from "node:url";
import { createClient } from "redis";
import { Redis } from "ioredis";
import type { RedisLike } from "redis-ratelimit";

const here = dirname(fileURLToPath(import.meta.url));

/** The module: `RL_MODULE`, else the repository's debug build. */
export function modulePath(): string {
  const path = process.env.RL_MODULE ?? resolve(here, "../../../../target/debug/libredis_ratelimit.so");
  if (!existsSync(path)) throw new Error(`module not built at ${path}: run cargo build, or set RL_MODULE`);
  return path;
}

/** A free loopback port. */
export function freePort(): Promise<number> {
  return new Promise((ok, fail) => {
    const s = createServer();
    s.once("error", fail);
    s.listen(0, "127.0.0.1", () => {
      const address = s.address();
      const port = typeof address === "object" && address !== null ? address.port : 0;
      s.close(() => ok(port));
    });
  });
}

function canConnect(port: number): Promise<boolean> {
  return new Promise((ok) => {
    const socket = connect(port, "127.0.0.1");
    socket.once("connect", () => {
      socket.destroy();
      ok(true);
    });
    socket.once("error", () => ok(false));
  });
}

/** How a server is started. */
export interface ServerOptions {
  /** `clock manual` (default true). */
  readonly manualClock?: boolean;
  /** `policies on`. */
  readonly policies?: boolean;
}

/** A redis-server with the module, stopped by `stop()`. */
export class Server {
  private child: ChildProcess | undefined;
  readonly dir = mkdtempSync(join(tmpdir(), "rl-node-"));

  private constructor(
    readonly port: number,
    readonly options: ServerOptions,
  ) {}

  /** Starts a server on a free port. */
  static async start(options: ServerOptions = {}): Promise<Server> {
    const server = new Server(await freePort(), options);
    await server.spawn();
    return server;
  }

  /** The URL clients connect to. */
  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** Starts (again) on the same port, on the data already in its directory. */
  async spawn(): Promise<void> {
    const args = ["--port", String(this.port), "--bind", "127.0.0.1", "--dir", this.dir, "--save", "", "--appendonly", "no"];
    args.push("--loadmodule", modulePath());
    if (this.options.manualClock !== false) args.push("clock", "manual");
    if (this.options.policies === true) args.push("policies", "on");
    const child = spawn(process.env.RL_SERVER ?? "redis-server", args, { stdio: "ignore" });
    this.child = child;
    // Up when it accepts a connection; bounded, never a fixed sleep.
    for (let i = 0; i < 500; i++) {
      if (child.exitCode !== null) throw new Error(`redis-server exited with ${child.exitCode}`);
      if (await canConnect(this.port)) return;
      await new Promise((r) => setTimeout(r, 10));
    }
    throw new Error("redis-server did not start");
  }

  /** Stops the process (SIGKILL: as a crash, nothing saved) and waits for it to exit. */
  async kill(): Promise<void> {
    const child = this.child;
    this.child = undefined;
    if (child === undefined || child.exitCode !== null) return;
    const exited = new Promise((r) => child.once("exit", r));
    child.kill("SIGKILL");
    await exited;
  }

  /** Freezes the process (`SIGSTOP`): connections stay open, nothing is answered. */
  pause(): void {
    this.child?.kill("SIGSTOP");
  }

  /** Thaws a frozen process (`SIGCONT`). */
  resume(): void {
    this.child?.kill("SIGCONT");
  }

  /** Stops the server and removes its directory. */
  async stop(): Promise<void> {
    await this.kill();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** One of the client libraries, in one protocol. */
export interface ClientKind {
  /** A name for the test titles. */
  readonly name: string;
  /** Opens a connection to `url`. */
  open(url: string): Promise<OpenClient>;
}

/** A connected client and how to close it. */
export interface OpenClient {
  /** What the package takes. */
  readonly redis: RedisLike;
  /** Closes the connection. */
  close(): Promise<void>;
}

function nodeRedis(RESP: 2 | 3): ClientKind {
  return {
    name: `node-redis RESP${RESP}`,
    async open(url) {
      const client = createClient({ url, RESP });
      client.on("error", () => undefined);
      await client.connect();
      return { redis: client, close: async () => client.destroy() };
    },
  };
}

function ioredis(protocol: 2 | 3): ClientKind {
  return {
    name: `ioredis RESP${protocol}`,
    async open(url) {
      const client = new Redis(url, { protocol, lazyConnect: true });
      client.on("error", () => undefined);
      await client.connect();
      return { redis: client, close: async () => void client.disconnect() };
    },
  };
}

/** One server for the enclosing suite: started before its tests, stopped after them. */
export function suiteServer(): () => Server {
  let server: Server | undefined;
  before(async () => {
    server = await Server.start();
  });
  after(async () => server?.stop());
  return () => {
    if (server === undefined) throw new Error("the suite's server is not started");
    return server;
  };
}

/** node-redis as users create it: its defaults (RESP2), only the URL given. */
export async function openNodeRedis(url: string): Promise<{ redis: RedisLike; close(): void }> {
  const c = createClient({ url });
  c.on("error", () => undefined);
  await c.connect();
  return { redis: c, close: () => c.destroy() };
}

/** Both clients in both protocols. */
export const CLIENTS: readonly ClientKind[] = [nodeRedis(2), nodeRedis(3), ioredis(2), ioredis(3)];

/**
 * Polls `probe` until it holds: waiting for a state, never a fixed sleep. Bounded by time (10 s), not by a
 * count of polls: each poll is a round trip, which a loaded machine makes slow.
 */
export async function until(probe: () => Promise<boolean>, what: string): Promise<void> {
  const end = performance.now() + 10_000;
  while (performance.now() < end) {
    if (await probe()) return;
    await new Promise((r) => setImmediate(r));
  }
  throw new Error(`never: ${what}`);
}

export { nodeRedis, ioredis };

