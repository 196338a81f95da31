import type { RawReply, RedisLike } from "./client.js";
import { UnavailableError, fromClientError } from "./errors.js";
import { type CallOptions, GIVE_BACK_TIMEOUT_MS, Guard, type Undo } from "./guard.js";

/** The most connections of one limiter that hold a waiting command (`WAIT`) at once, by default. */
export const DEFAULT_MAX_WAITERS = 64;

/** An idle waiting connection is closed after this long (ms). */
const IDLE_MS = 2000;

/** A connection of the pool: how to send on it and how to close it. */
interface Conn {
  send(args: string[]): Promise<unknown>;
  close(): void;
}

interface NodeRedisDuplicable {
  duplicate(overrides?: object): { connect(): Promise<unknown>; sendCommand(args: string[]): Promise<unknown>; destroy(): void; on(event: "error", f: () => void): unknown };
  sendCommand(args: string[]): Promise<unknown>;
}

interface IoredisDuplicable {
  duplicate(overrides?: object): { connect(): Promise<unknown>; call(command: string, ...args: string[]): Promise<unknown>; disconnect(): void; on(event: "error", f: () => void): unknown };
  call(command: string, ...args: string[]): Promise<unknown>;
}

/** How to open a connection of its own from the user's client, or `undefined` (a `sendCommand` function). */
function opener(client: RedisLike): (() => Promise<Conn>) | undefined {
  if (typeof client === "function" || !("duplicate" in client) || typeof client.duplicate !== "function") return undefined;
  if ("call" in client && typeof client.call === "function") {
    const io = client as IoredisDuplicable;
    return async () => {
      // Nothing queued offline, nothing resent after a reconnection, no reconnection at all:
      // a broken waiting connection is thrown away.
      const c = io.duplicate({ lazyConnect: true, enableOfflineQueue: false, autoResendUnfulfilledCommands: false, maxRetriesPerRequest: 0, retryStrategy: () => null });
      c.on("error", () => undefined);
      await c.connect();
      return {
        send: (args) => {
          const [command = "", ...rest] = args;
          return c.call(command, ...rest);
        },
        close: () => { c.disconnect(); },
      };
    };
  }
  const nr = client as NodeRedisDuplicable;
  return async () => {
    const c = nr.duplicate({ disableOfflineQueue: true, socket: { reconnectStrategy: false } });
    c.on("error", () => undefined);
    await c.connect();
    return { send: (args) => c.sendCommand(args), close: () => { c.destroy(); } };
  };
}

/**
 * A bounded pool of connections of the limiter's own, opened with the
 * user's client's `duplicate()`, for commands that wait on the server
 * (`WAIT`): a waiting command never holds the connection other calls
 * use. At most `max` wait at once; more wait here for a connection, within
 * their deadline. A connection whose call timed out or was abandoned is
 * closed (the server then drops the waiter: it never admits it later);
 * idle ones are closed after 2 s.
 */
export class WaitPool {
  private readonly open: (() => Promise<Conn>) | undefined;
  private readonly idle: Conn[] = [];
  private readonly queue: ((conn: Conn | undefined) => void)[] = [];
  private busy = 0;
  private idleTimer: NodeJS.Timeout | undefined;

  constructor(
    client: RedisLike,
    private readonly guard: Guard,
    readonly max: number = DEFAULT_MAX_WAITERS,
  ) {
    this.open = opener(client);
  }

  /** Whether waits get connections of their own (the client has `duplicate()`). */
  get pooled(): boolean {
    return this.open !== undefined;
  }

  /**
   * Sends the waiting command `args` on a connection of its own, within
   * `options.timeout` plus `waitMs`. Without `duplicate()` (a
   * `sendCommand` function) it goes through the guard on the shared
   * connection.
   *
   * With `undo`, a call given up on after it was written keeps its place in
   * the server's line instead: its connection stays open until the reply
   * lands (within `waitMs` plus {@link GIVE_BACK_TIMEOUT_MS}, else it is
   * closed), and what the reply took is given back with `undo`'s command.
   */
  async call(args: string[], options: CallOptions, waitMs: number, undo?: Undo): Promise<RawReply> {
    const open = this.open;
    if (open === undefined) return this.guard.call(args, options, waitMs, undo);
    const { signal } = options;
    if (signal?.aborted === true) throw signal.reason;
    const command = args[0] ?? "";
    // The shared connection is known down: so is the server.
    if (this.guard.open) this.guard.refuseIfDown(command);
    const deadline = Date.now() + (options.timeout ?? this.guard.timeoutMs) + waitMs;
    let timer: NodeJS.Timeout | undefined;
    let onAbort: (() => void) | undefined;
    let conn: Conn | undefined;
    const state = { done: false };
    const stop = new Promise<never>((_, reject) => {
      timer = setTimeout(() => { reject(new UnavailableError("timeout", command)); }, deadline - Date.now());
      if (signal !== undefined) {
        onAbort = () => { reject(signal.reason as Error); };
        signal.addEventListener("abort", onAbort, { once: true });
      }
    });
    const work = (async () => {
      const taken = await this.take(open);
      if (state.done) {
        this.give(taken);
        throw new UnavailableError("timeout", command);
      }
      conn = taken;
      return (await taken.send(args)) as RawReply;
    })();
    work.catch(() => undefined);
    try {
      const reply = await Promise.race([work, stop]);
      state.done = true;
      this.give(conn);
      return reply;
    } catch (error) {
      state.done = true;
      // A waiter that is given up on, or a broken connection: close it, so the server drops the waiter.
      if (conn !== undefined) {
        const typed = fromClientError(error, command);
        if (typed !== error && !(error instanceof UnavailableError)) {
          this.give(conn);
          throw typed;
        }
        if (undo !== undefined) this.orphan(conn, work, undo, waitMs);
        else {
          conn.close();
          this.busy--;
          this.next();
        }
      }
      if (error instanceof UnavailableError || (signal !== undefined && error === signal.reason)) throw error;
      throw new UnavailableError("unavailable", command, { cause: error });
    } finally {
      clearTimeout(timer);
      if (onAbort !== undefined) signal?.removeEventListener("abort", onAbort);
    }
  }

  /** A written call nobody waits for: its reply's charge given back when it lands, then its connection reused. */
  private orphan(conn: Conn, work: Promise<RawReply>, undo: Undo, waitMs: number): void {
    let done = false;
    const finish = (reply: RawReply | undefined): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      if (reply === undefined) {
        conn.close();
        this.busy--;
        this.next();
        return;
      }
      this.give(conn);
      let back: string[] | undefined;
      try {
        back = undo(reply);
      } catch {
        // A reply of an unexpected shape: nothing known to give back.
      }
      if (back !== undefined) void this.guard.giveBack(back);
    };
    const timer = setTimeout(() => { finish(undefined); }, waitMs + GIVE_BACK_TIMEOUT_MS);
    timer.unref();
    work.then(finish, () => { finish(undefined); });
  }

  private take(open: () => Promise<Conn>): Promise<Conn> {
    const conn = this.idle.pop();
    if (conn !== undefined) {
      this.busy++;
      return Promise.resolve(conn);
    }
    if (this.busy < this.max) {
      this.busy++;
      return open().catch((e: unknown) => {
        this.busy--;
        throw e;
      });
    }
    return new Promise((resolve, reject) => {
      this.queue.push((c) => {
        if (c === undefined) {
          this.busy++;
          open().then(resolve, (e: unknown) => {
            this.busy--;
            reject(e instanceof Error ? e : new Error(String(e)));
          });
        } else resolve(c);
      });
    });
  }

  /** A connection back from a call that got its answer. */
  private give(conn: Conn | undefined): void {
    if (conn === undefined) return;
    const waiter = this.queue.shift();
    if (waiter !== undefined) {
      waiter(conn);
      return;
    }
    this.busy--;
    this.idle.push(conn);
    this.idleTimer ??= setTimeout(() => {
      this.idleTimer = undefined;
      this.drain();
    }, IDLE_MS).unref();
  }

  /** A slot freed by a closed connection: the next in line opens a new one. */
  private next(): void {
    const waiter = this.queue.shift();
    if (waiter !== undefined) waiter(undefined);
  }

  private drain(): void {
    for (const conn of this.idle.splice(0)) conn.close();
  }

  /** Closes every idle connection (those in use close when their call ends). */
  close(): void {
    clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
    this.drain();
  }
}
