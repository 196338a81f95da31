import type { Decision } from "./decision.js";
import { type Duration, durationMillis } from "./duration.js";
import { LeaseLostError } from "./errors.js";
import type { AcquireOptions, RateLimiter } from "./limiter.js";
import type { Count } from "./policy.js";

/** What {@link withLease} acquires, and how it keeps it. */
export interface LeaseOptions extends AcquireOptions {
  /** Slots held at once under the key. */
  readonly limit: Count;
  /** The lease's life without renewal: pick the longest the work may take between two renewals. */
  readonly ttl: Duration;
  /** How often to renew while the work runs, in ms (default: a third of `ttl`). */
  readonly renewEvery?: number;
  /** Aborting it stops the work's lease: renewal stops, the lease is released, the call rejects with the signal's reason. */
  readonly signal?: AbortSignal;
  /** Called after each renewal with whether the server still held the lease. */
  readonly onRenew?: (held: boolean) => void;
}

/** The lease held while the work runs. */
export interface HeldLease {
  /** The key the lease is held under. */
  readonly key: string;
  /** The lease, as `RL.ACQUIRE` returned it. */
  readonly lease: string;
  /** The acquiring decision. */
  readonly decision: Decision;
  /**
   * Aborted when the caller's signal aborts or the lease is lost (a
   * renewal found it ended: the reason is a {@link LeaseLostError}). Pass it
   * to the work's own calls.
   */
  readonly signal: AbortSignal;
}

/** What {@link withLease} resolves with: the work's value, or the denial when no slot was free. */
export type LeaseResult<T> =
  | { readonly acquired: true; readonly value: T; readonly decision: Decision }
  | { readonly acquired: false; readonly decision: Decision };

/**
 * Runs `work` holding one of `limit` concurrency slots under `key`
 * (`RL.ACQUIRE`), renewing the lease while it runs (`RL.RENEW`, every
 * third of `ttl` by default) and releasing it when it ends, however it
 * ends (`RL.RELEASE` in `finally`). When no slot is free (after `wait`, if
 * given) the work does not run and the denial is returned.
 *
 * Aborting `signal` releases the lease at once and rejects with the
 * signal's reason; the work sees it through {@link HeldLease.signal}. A
 * lease whose release fails (Redis unreachable) ends at its `ttl` on the
 * server.
 */
export async function withLease<T>(
  limiter: RateLimiter,
  key: string,
  options: LeaseOptions,
  work: (held: HeldLease) => Promise<T>,
): Promise<LeaseResult<T>> {
  const { signal } = options;
  signal?.throwIfAborted();
  const acquiring = limiter.acquire(key, { limit: options.limit, ttl: options.ttl }, options);
  const decision = await untilAborted(acquiring, signal, (d) => {
    // Aborted while the acquire was on its way: give back what it got.
    if (d.lease) void limiter.release(key, d.lease).catch(() => undefined);
  });
  const lease = decision.lease;
  if (!decision.allowed || lease === null || lease === undefined) return { acquired: false, decision };

  const stop = new AbortController();
  const onAbort = (): void => {
    stop.abort(signal?.reason);
  };
  signal?.addEventListener("abort", onAbort, { once: true });
  const every = options.renewEvery ?? Math.max(1, Number((durationMillis(options.ttl) ?? 3000n) / 3n));
  let timer: NodeJS.Timeout | undefined;
  const renew = (): void => {
    timer = setTimeout(() => {
      limiter.renew(key, lease, options.ttl).then(
        (held) => {
          options.onRenew?.(held);
          if (!held) stop.abort(new LeaseLostError(`the lease on ${key} ended before the work did`));
          else if (!stop.signal.aborted) renew();
        },
        // Redis unreachable: try again at the next tick; the lease lives until its ttl.
        () => {
          if (!stop.signal.aborted) renew();
        },
      );
    }, every);
  };
  renew();
  try {
    const value = await untilAborted(work({ key, lease, decision, signal: stop.signal }), signal);
    return { acquired: true, value, decision };
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener("abort", onAbort);
    if (!stop.signal.aborted) stop.abort();
    await limiter.release(key, lease).catch(() => undefined);
  }
}

/** `promise`, or a rejection with `signal`'s reason as soon as it aborts (then `late` gets the value). */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal | undefined, late?: (value: T) => void): Promise<T> {
  if (signal === undefined) return promise;
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => {
      reject(abortReason(signal));
      promise.then(late, () => undefined);
    };
    if (signal.aborted) {
      onAbort();
      return;
    }
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(error instanceof Error ? error : new Error(String(error)));
      },
    );
  });
}

/** The signal's reason, as an Error (`AbortSignal.abort()` gives a DOMException, itself an Error). */
function abortReason(signal: AbortSignal): Error {
  const reason: unknown = signal.reason;
  return reason instanceof Error ? reason : new Error(String(reason));
}
