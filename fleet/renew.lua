-- Extends the leases of running attempts. KEYS: 1 leases.
-- ARGV: 1 now µs ("0": the server's TIME), 2 lease ttl µs, 3.. lease ids.
-- Returns how many were still held (an expired lease is not taken back).
local now = tonumber(ARGV[1])
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local n = 0
for i = 3, #ARGV do
  n = n + redis.call('ZADD', KEYS[1], 'XX', 'CH', now + tonumber(ARGV[2]), ARGV[i])
end
redis.call('PEXPIRE', KEYS[1], math.ceil(tonumber(ARGV[2]) / 500))
return n
