import { fromClientError } from "./errors.js";

/**
 * A reply as a Redis client returns it: integers, strings, `null`, arrays,
 * and (RESP3) booleans, plain objects or `Map`s.
 */
export type RawReply = null | boolean | number | bigint | string | Uint8Array | RawReply[] | RawMap | Map<string, RawReply>;

/** A RESP3 map returned as a plain object. */
export interface RawMap {
  /** A field of the map. */
  readonly [field: string]: RawReply;
}

/**
 * Sends one command, given as its words (`["RL.GCRA", "k", "10", "1s"]`),
 * and resolves with the server's reply. The only thing this package needs
 * from a Redis client: node-redis's `client.sendCommand(args)` has this
 * shape as it is.
 */
export type SendCommand = (args: string[]) => Promise<unknown>;

/** The part of a node-redis client (`createClient()`, v4 and later) that is used. */
export interface NodeRedisLike {
  /** node-redis's raw-command call. */
  sendCommand(args: string[]): Promise<unknown>;
}

/** The part of an ioredis client (`new Redis()`, `Cluster`) that is used. */
export interface IoredisLike {
  /** ioredis's raw-command call. */
  call(command: string, ...args: string[]): Promise<unknown>;
}

/** A client this package can send commands with. */
export type RedisLike = NodeRedisLike | IoredisLike | SendCommand;

/** Sends commands through a node-redis client's `sendCommand`. */
export function fromNodeRedis(client: NodeRedisLike): SendCommand {
  return (args) => client.sendCommand(args);
}

/** Sends commands through an ioredis client's `call`. */
export function fromIoredis(client: IoredisLike): SendCommand {
  return (args) => {
    const [command = "", ...rest] = args;
    return client.call(command, ...rest);
  };
}

/**
 * A {@link SendCommand} for any supported client: a function is used as it
 * is, an ioredis client (it has `call`) through {@link fromIoredis}, a
 * node-redis client through {@link fromNodeRedis}. ioredis clients also
 * have a `sendCommand` of another shape, so `call` is looked for first.
 */
export function toSendCommand(client: RedisLike): SendCommand {
  if (typeof client === "function") return client;
  if ("call" in client && typeof client.call === "function") return fromIoredis(client);
  if ("sendCommand" in client && typeof client.sendCommand === "function") return fromNodeRedis(client);
  throw new TypeError("expected a node-redis client, an ioredis client or a sendCommand function");
}

/** Sends `args` and turns a server error into this package's typed errors. */
export async function send(sendCommand: SendCommand, args: string[]): Promise<RawReply> {
  try {
    return (await sendCommand(args)) as RawReply;
  } catch (error) {
    throw fromClientError(error, args[0] ?? "");
  }
}
