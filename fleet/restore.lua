-- Gives a replica's leases back their real ids after the ask that found
-- the host's state lost counted them as taken under stand-in ids (so that
-- no other replica got their slots meanwhile). KEYS: 1 leases. ARGV: 1 now
-- µs ("0": the server's TIME), 2 lease ttl µs, 3 the stand-ins' base,
-- 4 how many, 5.. the real lease ids.
local now = tonumber(ARGV[1])
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
for i = 1, tonumber(ARGV[4]) do redis.call('ZREM', KEYS[1], ARGV[3] .. ':r' .. i) end
for i = 5, #ARGV do redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[i]) end
redis.call('PEXPIRE', KEYS[1], math.ceil(tonumber(ARGV[2]) / 500))
return #ARGV - 4
