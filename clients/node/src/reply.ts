import type { RawReply } from "./client.js";
import { AllDecision, Decision, type Described, type Reservation } from "./decision.js";
import { UnexpectedReplyError } from "./errors.js";

/** The fields of a RESP3 map reply, whichever way the client returned it. */
type Fields = ReadonlyMap<string, RawReply>;

const FIELD_NAMES = new Set(["allowed", "limit", "remaining", "retry_after_ms", "reset_after_ms", "blocked_by"]);

/**
 * A map reply's fields, or `undefined` for an array reply (RESP2). Clients
 * return RESP3 maps as plain objects (node-redis, ioredis with
 * `replyMapping: "resp3"`), `Map`s, or flat `[name, value, ...]` arrays
 * (ioredis's default).
 */
function fieldsOf(reply: RawReply): Fields | undefined {
  if (reply instanceof Map) return reply;
  if (Array.isArray(reply)) {
    const first = reply[0];
    if (typeof first !== "string" || !FIELD_NAMES.has(first)) return undefined;
    const map = new Map<string, RawReply>();
    for (let i = 0; i + 1 < reply.length; i += 2) map.set(typeof reply[i] === "string" ? (reply[i] as string) : "", reply[i + 1] ?? null);
    return map;
  }
  if (reply !== null && typeof reply === "object" && !(reply instanceof Uint8Array)) {
    return new Map(Object.entries(reply));
  }
  return undefined;
}

function unexpected(reply: RawReply): UnexpectedReplyError {
  const shown = JSON.stringify(reply, (_, v: unknown) => (typeof v === "bigint" ? String(v) : v));
  return new UnexpectedReplyError(`unexpected reply: ${shown}`);
}

function int(value: RawReply | undefined, reply: RawReply): number {
  if (typeof value === "number" && Number.isInteger(value)) return value;
  if (typeof value === "bigint") return Number(value);
  if (typeof value === "string" && /^-?\d+$/.test(value)) return Number(value);
  throw unexpected(reply);
}

function bool(value: RawReply | undefined, reply: RawReply): boolean {
  if (typeof value === "boolean") return value;
  return int(value, reply) !== 0;
}

/** -1 means "not needed" or "never": both read as `null`. */
function wait(value: RawReply | undefined, reply: RawReply): number | null {
  const ms = int(value, reply);
  return ms < 0 ? null : ms;
}

function text(value: RawReply | undefined, reply: RawReply): string | null {
  if (value === null || value === undefined) return null;
  if (typeof value === "string") return value;
  if (value instanceof Uint8Array) return Buffer.from(value).toString("latin1");
  throw unexpected(reply);
}

/**
 * A single-key decision reply: five integers (RESP2) or a map (RESP3),
 * then `granted` (with `PARTIAL`) or `lease` (`RL.ACQUIRE`), then
 * `shadow_denied` (a `SHADOW` named policy).
 */
export function parseDecision(reply: RawReply, described: Described, partial: boolean): Decision {
  const fields = fieldsOf(reply);
  if (fields !== undefined) {
    const granted = fields.get("granted");
    const shadow = fields.get("shadow_denied");
    return new Decision(
      {
        allowed: bool(fields.get("allowed"), reply),
        limit: int(fields.get("limit"), reply),
        remaining: int(fields.get("remaining"), reply),
        retryAfterMs: wait(fields.get("retry_after_ms"), reply),
        resetAfterMs: int(fields.get("reset_after_ms"), reply),
        granted: granted === undefined ? undefined : int(granted, reply),
        lease: fields.has("lease") ? text(fields.get("lease"), reply) : undefined,
        shadowDenied: shadow === undefined ? undefined : bool(shadow, reply),
      },
      described,
    );
  }
  if (!Array.isArray(reply) || reply.length < 5 || reply.length > 7) throw unexpected(reply);
  // After the five fields: `granted` when the call was partial, a lease
  // (a string or nil) from a concurrency limit, then `shadow_denied`.
  const extra = reply.slice(5);
  const granted = partial && extra.length > 0 ? int(extra.shift(), reply) : undefined;
  const next = extra[0];
  const isLease = extra.length > 0 && (next === null || typeof next === "string" || next instanceof Uint8Array);
  const lease = isLease ? text(extra.shift(), reply) : undefined;
  const shadow = extra.shift();
  return new Decision(
    {
      allowed: bool(reply[0], reply),
      limit: int(reply[1], reply),
      remaining: int(reply[2], reply),
      retryAfterMs: wait(reply[3], reply),
      resetAfterMs: int(reply[4], reply),
      granted,
      lease,
      shadowDenied: shadow === undefined ? undefined : bool(shadow, reply),
    },
    described,
  );
}

/** A reply with `delay_ms` (`RESERVE`): the sixth field (RESP2), or the map entry (RESP3). */
export function parseReservation(reply: RawReply, described: Described): Reservation {
  const fields = fieldsOf(reply);
  if (fields !== undefined) return { decision: parseDecision(reply, described, false), delayMs: wait(fields.get("delay_ms"), reply) };
  if (!Array.isArray(reply) || reply.length !== 6) throw unexpected(reply);
  return { decision: parseDecision(reply.slice(0, 5), described, false), delayMs: wait(reply[5], reply) };
}

/**
 * An `RL.ALL` / `RL.SHARE` reply: `[allowed, blocked_by, retry_after_ms,
 * reply_1, ...]` (RESP2) or a map with `limits` (RESP3).
 */
export function parseAllDecision(reply: RawReply, described: readonly Described[], partial: boolean): AllDecision {
  const fields = fieldsOf(reply);
  let head: RawReply[];
  let limits: RawReply[];
  if (fields !== undefined) {
    const list = fields.get("limits");
    if (!Array.isArray(list)) throw unexpected(reply);
    head = [fields.get("allowed") ?? null, fields.get("blocked_by") ?? null, fields.get("retry_after_ms") ?? null];
    limits = list;
  } else {
    if (!Array.isArray(reply) || reply.length < 4) throw unexpected(reply);
    head = reply.slice(0, 3);
    limits = reply.slice(3);
  }
  if (limits.length !== described.length) throw unexpected(reply);
  const blockedBy = int(head[1], reply);
  return new AllDecision(
    bool(head[0], reply),
    blockedBy < 0 ? null : blockedBy,
    wait(head[2], reply),
    limits.map((limit, i) => parseDecision(limit, described[i] ?? { name: "default", quota: undefined }, partial)),
  );
}

/** An integer reply (`RL.RELEASE`, `RL.RENEW`, `RL.CLOCK`). */
export function parseInteger(reply: RawReply): number {
  return int(reply, reply);
}

/** `RL.CLOCK`'s microseconds, exactly. */
export function parseBigInteger(reply: RawReply): bigint {
  if (typeof reply === "bigint") return reply;
  if (typeof reply === "number" && Number.isInteger(reply)) return BigInt(reply);
  if (typeof reply === "string" && /^-?\d+$/.test(reply)) return BigInt(reply);
  throw unexpected(reply);
}
