-- Announces a replica and counts the live ones. KEYS: 1 replicas (ZSET
-- replica -> expiry µs). ARGV: 1 now µs ("0": the server's TIME), 2 ttl µs,
-- 3 replica name, 4 "1" to leave (a clean shutdown).
local now = tonumber(ARGV[1])
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
if ARGV[4] == '1' then
  redis.call('ZREM', KEYS[1], ARGV[3])
else
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[3])
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('PEXPIRE', KEYS[1], math.ceil(tonumber(ARGV[2]) / 500))
return redis.call('ZCARD', KEYS[1])
