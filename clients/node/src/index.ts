export { type RawReply, type RawMap, type SendCommand, type NodeRedisLike, type IoredisLike, type RedisLike, fromNodeRedis, fromIoredis, toSendCommand } from "./client.js";
export { AllDecision, Decision, type DecisionFields, type Described, type Quota, type RateLimitHeaders, type Reservation, ceilSeconds, quotaOf } from "./decision.js";
export { type Duration, type DurationUnit, durationArg, durationMillis } from "./duration.js";
export { LeaseLostError, RateLimitError, ReplyError, UnavailableError, UnexpectedReplyError, WrongTypeError } from "./errors.js";
export { type CallOptions, type Transport, DEFAULT_TIMEOUT_MS, Guard, PROBE_INTERVAL_MS, toTransport } from "./guard.js";
export { DEFAULT_MAX_WAITERS, WaitPool } from "./pool.js";
export { DegradedShares } from "./degraded.js";
export { type HeldLease, type LeaseOptions, type LeaseResult, withLease } from "./lease.js";
export {
  type AcquireOptions,
  type AllLimit,
  type AllOptions,
  type ChargeOptions,
  type CostOptions,
  type DecideOptions,
  type Fallback,
  type LimiterOptions,
  type NameOption,
  type ShareNode,
  type ShareOptions,
  type SketchOptions,
  type ThrottleParams,
  type WaitOptions,
  RateLimiter,
} from "./limiter.js";
export {
  type BucketPolicy,
  type ConcurrencyPolicy,
  type Count,
  type FixedPolicy,
  type GcraPolicy,
  type NamedPolicy,
  type Policy,
  type SlidingPolicy,
  policyWords,
  policyQuota,
  rateQuota,
} from "./policy.js";
export { type LeasablePolicy, type LeasedAcquireOptions, type LeasedLimitOptions, LeasedLimit, MAX_BLOCK } from "./leased-limit.js";
export { type HotKeyOptions, DEFAULT_HOT_KEYS_POLL_MS, HotKeyLeases } from "./hot-keys.js";
