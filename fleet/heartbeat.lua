-- Announces a replica and counts the live ones. KEYS: 1 replicas (ZSET
-- replica -> expiry µs), 2 rejoin (HASH: until, the rejoin's deadline µs;
-- expect, the replicas it waits for; done; r:<replica> for each replica
-- back). ARGV: 1 now µs ("0": the server's TIME), 2 ttl µs, 3 replica
-- name, 4 "1" to leave (a clean shutdown), 5 this replica's state: "0"
-- shared, "1" it paced alone, Redis answers, and attempts it started on
-- its share are not counted in Redis yet, "2" the same with none
-- uncounted (it starts none on its share meanwhile), 6 the live replicas
-- it knew, 7 the rejoin's wait µs.
--
-- The replicas that paced alone go back to the shared limits once every
-- replica is back: those that paced alone with no attempt out uncounted,
-- the shared ones by their heartbeat. Until then, each sends on its share
-- (or, back, nothing), so the cap and the bucket count every send that
-- the shared ones' grants could add to. The first replica that paced
-- alone to hear Redis opens the rejoin, for as many replicas as the most
-- any returning one knew; it closes when they are all back, or at the
-- deadline (a replica not heard within the wait, a lease period, is not
-- live).
-- Returns: live replicas, µs until the rejoin's deadline (0: none pending
-- for this replica), and this replica's index among the live ones by
-- name (0 to live-1), by which the replicas divide a limit smaller than
-- their number (Share).
local now = tonumber(ARGV[1])
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
if ARGV[4] == '1' then
  redis.call('ZREM', KEYS[1], ARGV[3])
  return {redis.call('ZCARD', KEYS[1]), 0}
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('PEXPIRE', KEYS[1], math.ceil(tonumber(ARGV[2]) / 500))
local mode = ARGV[5]
local wait = tonumber(ARGV[7])
if mode ~= '0' and redis.call('EXISTS', KEYS[2]) == 0 then
  redis.call('HSET', KEYS[2], 'until', string.format('%.0f', now + wait), 'expect', 0)
  redis.call('PEXPIRE', KEYS[2], math.ceil(wait / 500))
end
local rejoin = 0
local r = redis.call('HMGET', KEYS[2], 'until', 'expect', 'done')
if r[1] then
  local deadline, expect = tonumber(r[1]), tonumber(r[2])
  if mode ~= '0' and tonumber(ARGV[6]) > expect then
    expect = tonumber(ARGV[6])
    redis.call('HSET', KEYS[2], 'expect', expect)
  end
  if mode ~= '1' then redis.call('HSET', KEYS[2], 'r:' .. ARGV[3], 1) end
  local done = r[3] ~= false
  if not done and (redis.call('HLEN', KEYS[2]) - 2 >= expect or now >= deadline) then
    redis.call('HSET', KEYS[2], 'done', 1)
    done = true
  end
  if not done and mode ~= '0' then rejoin = math.max(deadline - now, 1) end
end
local names = redis.call('ZRANGE', KEYS[1], 0, -1)
table.sort(names)
local index = 0
for i, name in ipairs(names) do
  if name == ARGV[3] then index = i - 1 end
end
return {#names, rejoin, index}
