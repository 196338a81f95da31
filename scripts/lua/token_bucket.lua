-- A token bucket the way it is commonly written as a Redis script today
-- (for the benchmark's comparison; the module's RL.BUCKET replaces it).
-- KEYS[1] = key; ARGV = capacity, refill, period_ms [, cost].
-- The value is "tokens:last_refill_ms".
-- Reply like RL.BUCKET: {allowed, capacity, remaining, retry_after_ms, reset_after_ms}.
local key = KEYS[1]
local capacity = tonumber(ARGV[1])
local rate = tonumber(ARGV[2]) / tonumber(ARGV[3])
local cost = tonumber(ARGV[4] or 1)

local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)

local tokens, last = capacity, now
local state = redis.call('GET', key)
if state then
  local sep = string.find(state, ':', 1, true)
  tokens = tonumber(string.sub(state, 1, sep - 1))
  last = tonumber(string.sub(state, sep + 1))
end
tokens = math.min(capacity, tokens + math.max(0, now - last) * rate)

if tokens < cost then
  local retry = math.ceil((cost - tokens) / rate)
  return {0, capacity, math.floor(tokens), retry, math.ceil((capacity - tokens) / rate)}
end
tokens = tokens - cost
local ttl = math.max(1, math.ceil((capacity - tokens) / rate))
redis.call('SET', key, tokens .. ':' .. now, 'PX', ttl)
return {1, capacity, math.floor(tokens), -1, ttl}
