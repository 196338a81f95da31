-- A concurrency limit the way it is commonly written as a Redis script today
-- (for the benchmark's comparison; the module's RL.ACQUIRE replaces it): a
-- sorted set of lease ids scored by deadline. Release is a plain ZREM.
-- KEYS[1] = key; ARGV = limit, ttl_ms, lease id (made by the client).
-- Reply: 1 if acquired, 0 if full.
local key = KEYS[1]
local limit = tonumber(ARGV[1])
local ttl = tonumber(ARGV[2])

local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)

redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
if redis.call('ZCARD', key) >= limit then
  return 0
end
redis.call('ZADD', key, now + ttl, ARGV[3])
-- The key lives as long as its newest lease (same ttl for every caller).
redis.call('PEXPIRE', key, ttl)
return 1
