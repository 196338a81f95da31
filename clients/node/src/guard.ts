import { type RawReply, type RedisLike, type SendCommand } from "./client.js";
import { UnavailableError, fromClientError } from "./errors.js";

/** The default deadline of one decision, in ms (a command's own `WAIT` comes on top). */
export const DEFAULT_TIMEOUT_MS = 300;

/** While the circuit is open, a `PING` probes the connection this often (ms), one at a time. */
export const PROBE_INTERVAL_MS = 150;

/** A give-back is sent within this long (ms) of the late reply it undoes, else its units stay charged. */
export const GIVE_BACK_TIMEOUT_MS = 10_000;

/** The command that gives back what `reply` took (a refund, a release), or `undefined` when it took nothing. */
export type Undo = (reply: RawReply) => string[] | undefined;

/** The deadline and cancellation of one call. */
export interface CallOptions {
  /** This call's deadline in ms (default: the limiter's `timeout`). */
  readonly timeout?: number;
  /** Gives up waiting: the call rejects with `signal.reason`, and a command not yet written is never written. */
  readonly signal?: AbortSignal;
}

/**
 * How a command reaches a Redis client: `send` writes it (a command still
 * queued when `signal` aborts is dropped by node-redis and never written);
 * `ready` says whether a command sent now would be written now rather than
 * queued for a reconnection.
 */
export interface Transport {
  send(args: string[], signal: AbortSignal): Promise<unknown>;
  /**
   * The caller of `sent` (a promise `send` returned) stopped waiting: a
   * client that would write it later (ioredis's offline queue, or its
   * resending after a reconnection) drops it instead.
   */
  forget?(sent: Promise<unknown>): void;
  ready(): boolean;
  /** Resolves `true` once the client is ready, `false` if `signal` aborts first. */
  untilReady(signal: AbortSignal): Promise<boolean>;
}

interface Emitter {
  once(event: "ready", listener: () => void): unknown;
  removeListener(event: "ready", listener: () => void): unknown;
}

/** `true` once `client` emits `ready` (or `ready()` holds), `false` if `signal` aborts first. */
function readyEvent(client: Emitter, ready: () => boolean, signal: AbortSignal): Promise<boolean> {
  if (ready()) return Promise.resolve(true);
  if (signal.aborted) return Promise.resolve(false);
  return new Promise((resolve) => {
    const onReady = (): void => {
      signal.removeEventListener("abort", onAbort);
      resolve(true);
    };
    const onAbort = (): void => {
      client.removeListener("ready", onReady);
      resolve(false);
    };
    client.once("ready", onReady);
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

interface NodeRedisShape {
  sendCommand(args: string[], options?: { abortSignal?: AbortSignal }): Promise<unknown>;
  readonly isReady?: boolean;
  readonly once?: unknown;
}

/** The part of denque (ioredis's queues) used to drop a command no caller waits for. */
interface QueueShape {
  readonly length: number;
  peekAt(index: number): { readonly command?: { readonly promise?: unknown; reject?(error: Error): void } } | undefined;
  removeOne(index: number): unknown;
}

interface IoredisShape {
  call(command: string, ...args: string[]): Promise<unknown>;
  readonly offlineQueue?: QueueShape | null;
  readonly prevCommandQueue?: QueueShape | null;
  on?(event: "reconnecting", listener: () => void): unknown;
  readonly status?: string;
  readonly once?: unknown;
  readonly stream?: { readonly writable?: boolean };
  readonly options?: { readonly autoResendUnfulfilledCommands?: boolean; readonly enableOfflineQueue?: boolean };
}

let warnedResend = false;

/**
 * The transport of `client`. A node-redis client is given each call's
 * signal (its queued commands are dropped at the deadline) and is ready
 * when `isReady`; an ioredis client when its `status` is `"ready"`. A
 * `sendCommand` function is always taken as ready.
 */
export function toTransport(client: RedisLike): Transport {
  if (typeof client === "function") {
    const send: SendCommand = client;
    return { send: (args) => send(args), ready: () => true, untilReady: () => Promise.resolve(true) };
  }
  if ("call" in client && typeof client.call === "function") {
    const io = client as IoredisShape;
    const o = io.options;
    if (o !== undefined && (o.autoResendUnfulfilledCommands !== false || o.enableOfflineQueue !== false) && !warnedResend) {
      warnedResend = true;
      process.emitWarning(
        "redis-ratelimit: this ioredis client queues commands while reconnecting and resends, after a reconnection, commands it " +
          "wrote before the connection dropped; pass { enableOfflineQueue: false, autoResendUnfulfilledCommands: false } so that " +
          "a decision whose caller gave up is never executed later",
        { code: "RATELIMIT_IOREDIS_QUEUE" },
      );
    }
    // "ready" with a closed stream: ioredis would queue the command offline.
    const ready = (): boolean => (io.status === undefined || io.status === "ready") && io.stream?.writable !== false;
    // Commands whose callers stopped waiting and that ioredis may still write (its offline queue,
    // or the commands it resends after a reconnection): dropped from its queues whenever they are there.
    const abandoned = new Set<Promise<unknown>>();
    const purge = (): void => {
      for (const queue of [io.offlineQueue, io.prevCommandQueue]) {
        if (queue === null || queue === undefined || typeof queue.peekAt !== "function") continue;
        for (let i = queue.length - 1; i >= 0; i--) {
          const command = queue.peekAt(i)?.command;
          const promise = command?.promise;
          if (promise instanceof Promise && abandoned.has(promise)) {
            queue.removeOne(i);
            abandoned.delete(promise);
            command?.reject?.(new Error("redis-ratelimit: dropped, its caller stopped waiting"));
          }
        }
      }
    };
    if (typeof io.on === "function") io.on("reconnecting", purge);
    return {
      send: (args) => {
        const [command = "", ...rest] = args;
        return io.call(command, ...rest);
      },
      forget: (sent) => {
        abandoned.add(sent);
        const settle = (): void => {
          abandoned.delete(sent);
        };
        sent.then(settle, settle);
        purge();
      },
      ready,
      untilReady: (signal) => (typeof io.once === "function" ? readyEvent(io as IoredisShape & Emitter, ready, signal) : Promise.resolve(ready())),
    };
  }
  const nr = client as NodeRedisShape;
  const ready = (): boolean => nr.isReady !== false;
  return {
    send: (args, signal) => nr.sendCommand(args, { abortSignal: signal }),
    ready,
    untilReady: (signal) => (typeof nr.once === "function" ? readyEvent(nr as NodeRedisShape & Emitter, ready, signal) : Promise.resolve(ready())),
  };
}

/**
 * Deadlines and a circuit over one connection. Every call has a deadline;
 * a call is never sent while the connection is known down (the client is
 * reconnecting, or a call timed out or failed on the connection): it is
 * refused at once with {@link UnavailableError}. While the circuit is open
 * one `PING` at a time, every {@link PROBE_INTERVAL_MS}, probes the
 * connection; the first answer closes the circuit.
 */
export class Guard {
  private openSince: number | undefined;
  private probing = false;
  /** Decision commands handed to the client so far (probes and give-backs not counted). */
  sent = 0;
  /** Replies that landed after their caller had stopped waiting. */
  lateReplies = 0;
  /** Give-backs (a late reply's charge refunded, its lease released) the server answered. */
  givenBack = 0;
  /** Give-backs that got no answer (their units stay charged until they refill). */
  givebackFailures = 0;
  /** The client reported itself not ready since the circuit opened: its being ready again closes the circuit. */
  private sawDown = false;
  private probeTimer: NodeJS.Timeout | undefined;

  constructor(
    readonly transport: Transport,
    readonly timeoutMs: number = DEFAULT_TIMEOUT_MS,
  ) {
    if (!(timeoutMs > 0) || !Number.isFinite(timeoutMs)) throw new RangeError(`timeout must be a positive number of ms, got ${timeoutMs}`);
  }

  /** Whether calls are refused at once (the connection is known down). */
  get open(): boolean {
    return this.openSince !== undefined;
  }

  /**
   * Sends `args` and resolves with the reply within `options.timeout` (plus
   * `extraMs`, a command's own `WAIT`), else rejects with
   * {@link UnavailableError}; a server error rejects with a `ReplyError`.
   *
   * `undo` says how to give back what a reply took (the command that
   * refunds its charge or releases its lease): when the caller stopped
   * waiting (the deadline, or its signal) after the command was handed to
   * the client, and the reply lands later, that command is sent then.
   */
  async call(args: string[], options: CallOptions = {}, extraMs = 0, undo?: Undo): Promise<RawReply> {
    const { signal } = options;
    if (signal?.aborted === true) throw signal.reason;
    if (this.open) this.refuseIfDown(args[0] ?? "");
    const timeout = options.timeout ?? this.timeoutMs;
    const controller = new AbortController();
    let timer: NodeJS.Timeout | undefined;
    let onAbort: (() => void) | undefined;
    let handed: Promise<unknown> | undefined;
    const giveUp = (): void => {
      if (handed !== undefined) this.transport.forget?.(handed);
    };
    const stop = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const error = new UnavailableError("timeout", args[0] ?? "");
        controller.abort(error);
        giveUp();
        reject(error);
      }, timeout + extraMs);
      if (signal !== undefined) {
        onAbort = () => {
          controller.abort(signal.reason);
          giveUp();
          reject(signal.reason as Error);
        };
        signal.addEventListener("abort", onAbort, { once: true });
      }
    });
    // A client not ready yet (connecting) is waited for within the deadline: the command is
    // written once it is ready, or never.
    const transport = this.transport;
    const handOver = (): Promise<unknown> => {
      this.sent++;
      const p = transport.send(args, controller.signal);
      handed = p;
      // A reply that lands after the caller stopped waiting: what it took is given back.
      p.then(
        (reply) => {
          if (!controller.signal.aborted) return;
          // The circuit stays as it is: a late reply may have waited in the socket since before the
          // server froze; the probe says whether the connection answers now.
          this.lateReplies++;
          let back: string[] | undefined;
          try {
            back = undo?.(reply as RawReply);
          } catch {
            // A reply of an unexpected shape: nothing known to give back.
          }
          if (back !== undefined) void this.giveBack(back);
        },
        () => undefined,
      );
      return p;
    };
    const sent = transport.ready()
      ? handOver()
      : transport.untilReady(controller.signal).then((ready) => {
          if (!ready || controller.signal.aborted) throw new UnavailableError("timeout", args[0] ?? "");
          return handOver();
        });
    // Once the call has answered, a late reply or failure is nobody's: never unhandled.
    sent.catch(() => undefined);
    try {
      return (await Promise.race([sent, stop])) as RawReply;
    } catch (error) {
      if (error instanceof UnavailableError) {
        this.trip();
        throw error;
      }
      if (signal !== undefined && error === signal.reason) throw error;
      const typed = fromClientError(error, args[0] ?? "");
      if (typed === error) {
        // Not the server's answer: the connection failed.
        this.trip();
        throw new UnavailableError("unavailable", args[0] ?? "", { cause: error });
      }
      throw typed;
    } finally {
      clearTimeout(timer);
      if (onAbort !== undefined) signal?.removeEventListener("abort", onAbort);
    }
  }

  /**
   * Sends `args` (a refund or a release for a reply nobody waited for),
   * outside the circuit, within {@link GIVE_BACK_TIMEOUT_MS}.
   */
  async giveBack(args: string[]): Promise<void> {
    const controller = new AbortController();
    const timer = setTimeout(() => {
      controller.abort(new UnavailableError("timeout", args[0] ?? ""));
    }, GIVE_BACK_TIMEOUT_MS);
    timer.unref();
    try {
      if (!this.transport.ready() && !(await this.transport.untilReady(controller.signal))) throw new UnavailableError("timeout", args[0] ?? "");
      const sent = this.transport.send(args, controller.signal);
      const aborted = new Promise<never>((_, reject) => {
        controller.signal.addEventListener("abort", () => { reject(new UnavailableError("timeout", args[0] ?? "")); }, { once: true });
      });
      sent.catch(() => undefined);
      await Promise.race([sent, aborted]);
      this.givenBack++;
    } catch {
      this.givebackFailures++;
    } finally {
      clearTimeout(timer);
    }
  }

  /** Throws {@link UnavailableError} at once (and opens the circuit) when the connection is known down. */
  refuseIfDown(command: string): void {
    const ready = this.transport.ready();
    if (this.open && ready && this.sawDown) this.reset();
    if (this.open || !ready) {
      if (!ready) this.sawDown = true;
      this.trip();
      throw new UnavailableError("unavailable", command);
    }
  }

  /** Closes the circuit. */
  private reset(): void {
    this.openSince = undefined;
    this.sawDown = false;
  }

  /** Opens the circuit (if closed) and schedules the next probe. */
  private trip(): void {
    this.openSince ??= Date.now();
    if (this.probing || this.probeTimer !== undefined) return;
    this.probeTimer = setTimeout(() => {
      this.probeTimer = undefined;
      void this.probe();
    }, PROBE_INTERVAL_MS);
    this.probeTimer.unref();
  }

  private async probe(): Promise<void> {
    if (!this.open) return;
    if (!this.transport.ready()) {
      this.sawDown = true;
      this.trip();
      return;
    }
    if (this.sawDown) {
      // The client reconnected by itself: its handshake was the probe.
      this.reset();
      return;
    }
    this.probing = true;
    const controller = new AbortController();
    const timer = setTimeout(() => { controller.abort(); }, Math.max(this.timeoutMs, PROBE_INTERVAL_MS));
    timer.unref();
    try {
      const sent = this.transport.send(["PING"], controller.signal);
      sent.catch(() => undefined);
      const aborted = new Promise<never>((_, reject) => {
        controller.signal.addEventListener("abort", () => { reject(new Error("probe timed out")); }, { once: true });
      });
      await Promise.race([sent, aborted]);
      this.reset();
    } catch {
      // Still down: probe again.
      this.probing = false;
      this.trip();
    } finally {
      clearTimeout(timer);
      this.probing = false;
    }
  }

  /** Stops probing (the circuit stays as it is). */
  close(): void {
    clearTimeout(this.probeTimer);
    this.probeTimer = undefined;
  }
}
