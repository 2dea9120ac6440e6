-- Extends the leases of running attempts. KEYS: 1 leases, 2 state.
-- ARGV: 1 now µs ("0": the server's TIME), 2 lease ttl µs, 3 the state
-- version of this replica's last write (0: none recalled), 4 its mark's
-- name,
-- 5.. lease ids.
-- Returns how many were still held. An expired lease is not taken back,
-- unless the host's state lacks this replica's last write (Redis lost
-- it: ask.lua): then its leases are made again.
local now = tonumber(ARGV[1])
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local mark = redis.call('HGET', KEYS[2], 'm:' .. ARGV[4]) or '0'
local lost = tonumber(ARGV[3]) > tonumber(string.match(mark, '^%d+'))
local n = 0
for i = 5, #ARGV do
  if lost then
    redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[i])
    n = n + 1
  else
    n = n + redis.call('ZADD', KEYS[1], 'XX', 'CH', now + tonumber(ARGV[2]), ARGV[i])
  end
end
redis.call('PEXPIRE', KEYS[1], math.ceil(tonumber(ARGV[2]) / 500))
return n
