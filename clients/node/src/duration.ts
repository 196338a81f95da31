/** The units the module reads in a duration: milliseconds, seconds, minutes, hours, days. */
export type DurationUnit = "ms" | "s" | "m" | "h" | "d";

/**
 * A duration: a number of **milliseconds**, or a string in the module's
 * syntax (`"250ms"`, `"1s"`, `"15m"`, `"1h"`, `"1d"`; a bare `"60"` is
 * seconds, as the module reads it). `"10 s"` (a space before the unit, as
 * Upstash writes it) is accepted too.
 */
export type Duration = number | `${number}` | `${number}${DurationUnit}` | `${number} ${DurationUnit}`;

const UNIT_MS: Record<DurationUnit, bigint> = { ms: 1n, s: 1000n, m: 60_000n, h: 3_600_000n, d: 86_400_000n };

/**
 * The argument sent to the server for `duration`: a number becomes
 * `"<n>ms"`; a string is sent as written (without a space before its unit),
 * so that the server checks it and names it in its error.
 */
export function durationArg(duration: Duration): string {
  if (typeof duration === "number") return `${duration}ms`;
  const decimal = /^(\d*\.\d+) ?(ms|s|m|h|d)?$/.exec(duration);
  if (decimal === null) return duration.replace(" ", "");
  // The module reads whole numbers: "1.5 s" is sent as "1500ms" (a fraction of a ms is refused).
  const ms = Number(decimal[1]) * Number(UNIT_MS[(decimal[2] ?? "s") as DurationUnit]);
  const whole = Math.round(ms);
  if (Math.abs(ms - whole) > 1e-6) throw new RangeError(`duration '${duration}' is not a whole number of milliseconds`);
  return `${whole}ms`;
}

/**
 * `duration` in whole milliseconds, or `undefined` when it is not one the
 * module would accept (the server then answers with its error).
 */
export function durationMillis(duration: Duration): bigint | undefined {
  if (typeof duration === "number") {
    return Number.isSafeInteger(duration) && duration > 0 ? BigInt(duration) : undefined;
  }
  if (duration.includes(".")) {
    try {
      const arg = durationArg(duration);
      return /^\d+ms$/.test(arg) ? durationMillis(Number(arg.slice(0, -2))) : undefined;
    } catch {
      return undefined;
    }
  }
  const match = /^(\d+) ?(ms|s|m|h|d)?$/.exec(duration);
  if (match === null) return undefined;
  const [, digits, unit] = match;
  const ms = BigInt(digits ?? "0") * UNIT_MS[(unit ?? "s") as DurationUnit];
  return ms > 0n ? ms : undefined;
}
