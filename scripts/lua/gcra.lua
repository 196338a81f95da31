-- GCRA the way it is commonly written as a Redis script today (for the
-- benchmark's comparison; the module's RL.GCRA replaces it).
-- KEYS[1] = key; ARGV = limit, period_ms [, cost]. Burst = limit.
-- Reply like RL.GCRA: {allowed, limit, remaining, retry_after_ms, reset_after_ms}.
local key = KEYS[1]
local limit = tonumber(ARGV[1])
local period = tonumber(ARGV[2])
local cost = tonumber(ARGV[3] or 1)
local interval = period / limit
local tolerance = interval * limit

local t = redis.call('TIME')
local now = t[1] * 1000 + t[2] / 1000

local tat = tonumber(redis.call('GET', key))
if tat == nil or tat < now then
  tat = now
end
local new_tat = tat + interval * cost
local allow_at = new_tat - tolerance
if now < allow_at then
  local remaining = math.floor((tolerance - (tat - now)) / interval)
  return {0, limit, remaining, math.ceil(allow_at - now), math.ceil(tat - now)}
end
local ttl = math.ceil(new_tat - now)
redis.call('SET', key, new_tat, 'PX', ttl)
return {1, limit, math.floor((tolerance - ttl) / interval), -1, ttl}
