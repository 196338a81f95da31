/** The base class of every error this package throws. */
export class RateLimitError extends Error {
  override name = "RateLimitError";
}

/**
 * The server refused the command. `message` is the server's own, whole
 * (`ERR COST must be an integer from 0 to 9223372036854775807`); `code` is
 * its first word (`ERR`, `WRONGTYPE`, `NOPERM`, `OOM`, `UNBLOCKED`, ...).
 * `cause` is the client library's error.
 */
export class ReplyError extends RateLimitError {
  override name = "ReplyError";
  /** The error's first word, as the server sent it. */
  readonly code: string;
  /** The command that was refused (its name, e.g. `RL.GCRA`). */
  readonly command: string;

  /** Wraps the server's `message` for `command`; `cause` is the client's error. */
  constructor(message: string, command: string, options?: ErrorOptions) {
    super(message, options);
    this.code = message.split(" ", 1)[0] ?? "";
    this.command = command;
  }
}

/**
 * `WRONGTYPE`: the key holds another type, or another limiter's state
 * (`WRONGTYPE key holds RL.BUCKET state, not RL.GCRA state`). Nothing was
 * changed.
 */
export class WrongTypeError extends ReplyError {
  override name = "WrongTypeError";
}

/** The server's reply did not have the shape the command documents. */
export class UnexpectedReplyError extends RateLimitError {
  override name = "UnexpectedReplyError";
}

/**
 * A lease could not be kept: a renewal answered 0 (the lease had expired or
 * was released), so the work no longer holds its slot.
 */
export class LeaseLostError extends RateLimitError {
  override name = "LeaseLostError";
}

const SERVER_ERROR = /^[A-Z][A-Z_-]+ /;

/**
 * The error to throw for `error` thrown by a client while sending
 * `command`: a {@link ReplyError} (or {@link WrongTypeError}) when the
 * server answered with an error; anything else (a closed connection, a
 * timeout) as the client threw it.
 */
export function fromClientError(error: unknown, command: string): unknown {
  if (!(error instanceof Error) || !SERVER_ERROR.test(error.message)) return error;
  const Type = error.message.startsWith("WRONGTYPE ") ? WrongTypeError : ReplyError;
  return new Type(error.message, command, { cause: error });
}

/**
 * No answer from the server: the call's deadline passed (`reason:
 * "timeout"`), or the connection is known down (`"unavailable"`: the
 * client is reconnecting, or an earlier call failed or timed out and no
 * probe has been answered since). The caller's fallback decides.
 */
export class UnavailableError extends RateLimitError {
  override name = "UnavailableError";
  /** Why there is no answer. */
  readonly reason: "timeout" | "unavailable";
  /** The command that got no answer (its name, e.g. `RL.GCRA`). */
  readonly command: string;

  /** No answer to `command`, for `reason`. */
  constructor(reason: "timeout" | "unavailable", command: string, options?: ErrorOptions) {
    super(reason === "timeout" ? `${command}: no answer within the deadline` : `${command}: the connection is down`, options);
    this.reason = reason;
    this.command = command;
  }
}
