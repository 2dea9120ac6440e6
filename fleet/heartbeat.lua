-- Announces a replica and counts the live ones. KEYS: 1 replicas (ZSET
-- replica -> expiry µs), 2 rejoin (the time, µs, at which the replicas
-- that paced alone go back to the shared limits together). ARGV: 1 now µs
-- ("0": the server's TIME), 2 ttl µs, 3 replica name, 4 "1" to leave (a
-- clean shutdown), 5 rejoin wait µs (> 0: this replica paced alone and
-- Redis answers again; the first such replica sets the rejoin time, now
-- plus the wait, kept for twice the wait).
-- Returns: live replicas, µs until the rejoin time (0: none pending).
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
local wait = tonumber(ARGV[5] or '0')
if wait > 0 then
  redis.call('SET', KEYS[2], string.format('%.0f', now + wait), 'NX', 'PX', math.ceil(wait / 500))
end
local rejoin = 0
if wait > 0 then
  local at = tonumber(redis.call('GET', KEYS[2]) or '0')
  if at > now then rejoin = at - now end
end
return {redis.call('ZCARD', KEYS[1]), rejoin}
