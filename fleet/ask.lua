-- One send decision for one host, atomically: apply the releases of
-- finished attempts, then check pause, hold and breaker, take up to `want`
-- GCRA tokens and concurrency leases, and say when to ask again.
--
-- KEYS: 1 tat (GCRA theoretical arrival time, µs), 2 leases (ZSET lease id
-- -> expiry µs), 3 state (HASH: held_until, hold_start, reason, c429, rate,
-- streak, failures, open_until, probe_until, v, m:<replica>...), 4 paused,
-- 5 waiters (ZSET replica mark -> until µs: fair shares).
-- ARGV: 1 now µs ("0": the server's TIME), 2 configured rate /s,
-- 3 bucket capacity (tokens), 4 concurrency, 5 want, 6 lease ttl µs,
-- 7 lease id base, 8 adaptive (0/1), 9 min rate /s, 10 breaker failures,
-- 11 breaker cooldown µs, 12 hold schedule (µs, comma-separated),
-- 13 max retry-after µs, 14 number of releases, 15 tokens to take ahead
-- (without leases, for leases the replica keeps), 16 tokens given back
-- (taken ahead and not used), 17 burst (the AIMD step waits for
-- max(10, burst) successes, as pacer.Host's does), 18 the state version
-- of this replica's last write of the host (0: none recalled), 19 the
-- bucket's debt (µs) it recalls, 20 how long it paced alone before Redis
-- answered again (µs, 0: not lately), 21 the time since (µs), 22 its live
-- leases not released by this ask, 23 its mark's name (recall.go), 24 how
-- many attempts it started on its share (Redis away) are still out and not
-- counted here yet, then 5 per release:
-- lease id, outcome (0 success, 1 throttled, 2 failure, 3 answered,
-- 4 no send, 5 unresolved), retry-after µs (-1: none), age µs (since it
-- was sent), keep (1: the replica keeps the lease for its next send; it
-- is renewed instead of removed).
-- A "no send" with a retry-after is a partner's quota used up: the host is
-- held that long ("quota"), without a 429's escalation or rate cut, and
-- the bucket does not fill while so held (as pacer.Host's quota hold).
-- "Unresolved" (NXDOMAIN) holds the host by the schedule, its own
-- escalation (cdns), reason "dns", without a rate cut.
--
-- Tokens ahead are taken only when the host may send (not paused, held or
-- breaker open/half-open), whatever the concurrency; tokens given back
-- are taken off the bucket's debt as if never taken.
--
-- Every write raises the state's version (v) and records it as the
-- writer's mark (m:<replica>, with the time, for 11 minutes). A replica's mark below its last write's
-- version means the state was lost (or went back in time), whatever
-- others wrote since: the bucket takes the debt the replica recalls, and
-- its live leases are counted as taken (under stand-in ids, made real by
-- restore.lua). A replica that paced alone charges the bucket its
-- share's possible sends.
--
-- Returns: granted, wait µs (-1: no time known, poll), reason, fleet in
-- flight, effective rate (string), held for µs, consecutive 429s,
-- breaker ("closed", "open", "half-open"), paused (0/1), tokens taken
-- ahead, the version of this replica's last write, the bucket's debt µs,
-- lost (0/1), wrote (0/1: this call wrote the state), the attempts on the
-- share counted (their leases <base>:u1...).
local now = tonumber(ARGV[1])
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local conf_rate = tonumber(ARGV[2])
local cap = tonumber(ARGV[3])
local conc = tonumber(ARGV[4])
local want = tonumber(ARGV[5])
local lease_ttl = tonumber(ARGV[6])
local base = ARGV[7]
local adaptive = ARGV[8] == '1'
local min_rate = tonumber(ARGV[9])
local br_failures = tonumber(ARGV[10])
local cooldown = tonumber(ARGV[11])
local schedule_arg = ARGV[12]
local max_ra = tonumber(ARGV[13])
local nrel = tonumber(ARGV[14])
local want_tokens = tonumber(ARGV[15])
local give_back = tonumber(ARGV[16])
local burst = tonumber(ARGV[17])
local expect = tonumber(ARGV[18])
local recalled_debt = tonumber(ARGV[19])
local down = tonumber(ARGV[20])
local since_down = tonumber(ARGV[21])
local live_leases = tonumber(ARGV[22])
local mark_name = ARGV[23]
local unleased = tonumber(ARGV[24])
-- The slots above are ask.go's askArg constants, one name each
-- (TestAskSlots holds the two together); the releases follow from 25.
local schedule = {}
for v in string.gmatch(schedule_arg, '[^,]+') do schedule[#schedule + 1] = tonumber(v) end

local st = {}
local raw = redis.call('HGETALL', KEYS[3])
for i = 1, #raw, 2 do st[raw[i]] = raw[i + 1] end
local function num(k) return tonumber(st[k] or '0') end
local held_until, hold_start = num('held_until'), num('hold_start')
local c429, streak, failures, cdns = num('c429'), num('streak'), num('failures'), num('cdns')
local open_until, probe_until = num('open_until'), num('probe_until')
local rate = tonumber(st['rate']) or conf_rate
if not adaptive or rate > conf_rate then rate = conf_rate end
if rate < min_rate then rate = min_rate end
local reason = st['reason'] or ''
local dirty, hold_set = false, false
-- A mark is "version:seconds written"; marks older than 11 minutes go (a
-- replica expects its mark for 10 minutes after its write: recall.go).
local me = 'm:' .. mark_name
local function mark(k) return tonumber(string.match(st[k] or '0', '^%d+')) end
local v = num('v')
local lost = expect > mark(me)
if lost then v, dirty = math.max(v, expect), true end
local frozen = 0 -- µs the bucket does not fill for: quota holds (pacer's quotaHold)

-- Members go to ZREM and ZADD in chunks: one call each for a whole ask.
local function chunked(key, items, cmd, opt)
  for i = 1, #items, 500 do
    if opt then
      redis.call(cmd, key, opt, unpack(items, i, math.min(i + 499, #items)))
    else
      redis.call(cmd, key, unpack(items, i, math.min(i + 499, #items)))
    end
  end
end

local released, kept = {}, {}
for i = 0, nrel - 1 do
  local j = 25 + i * 5
  local outcome, ra, sent = tonumber(ARGV[j + 1]), tonumber(ARGV[j + 2]), now - tonumber(ARGV[j + 3])
  if ARGV[j + 4] == '1' then
    kept[#kept + 1], kept[#kept + 2] = now + lease_ttl, ARGV[j]
  elseif ARGV[j] ~= '' then
    released[#released + 1] = ARGV[j]
  end
  dirty = true
  if outcome == 0 or outcome == 1 or outcome == 3 then
    failures, open_until, probe_until = 0, 0, 0
  end
  if outcome <= 3 then cdns = 0 end
  if outcome == 0 then
    c429 = 0
    if adaptive and rate < conf_rate then
      streak = streak + 1
      if streak >= math.max(10, burst) then
        streak, rate = 0, math.min(conf_rate, rate + conf_rate * 0.05)
      end
    else
      streak = 0
    end
  elseif outcome == 1 then
    streak = 0
    local straggler = hold_start > 0 and sent < hold_start
    local d = 0
    if ra >= 0 then
      d, reason = math.min(ra, max_ra), '429 Retry-After'
    elseif not straggler then
      d, reason = schedule[math.min(c429 + 1, #schedule)], '429'
    end
    if not straggler then
      c429, hold_start = c429 + 1, now
      if adaptive then rate = math.max(rate * 0.5, min_rate) end
    end
    if now + d > held_until then held_until, hold_set = now + d, true end
  elseif outcome == 4 and ra >= 0 then
    local d = math.min(ra, max_ra)
    if now + d > held_until then
      frozen = frozen + now + d - math.max(held_until, now)
      held_until, reason = now + d, 'quota'
    end
  elseif outcome == 5 then
    if not (hold_start > 0 and sent < hold_start) then
      local d = schedule[math.min(cdns + 1, #schedule)]
      cdns, hold_start = cdns + 1, now
      if now + d > held_until then held_until, hold_set, reason = now + d, true, 'dns' end
    end
  elseif outcome == 2 then
    streak = 0
    if not (open_until > now) then
      failures = failures + 1
      if open_until > 0 or failures >= br_failures then
        open_until, probe_until = now + cooldown, 0
      end
    end
  end
end

chunked(KEYS[2], released, 'ZREM')
-- Kept leases are renewed, or made again if Redis lost them; but not one
-- this ask also releases (kept, then given back unused).
local gone = {}
for _, id in ipairs(released) do gone[id] = true end
for i = #kept - 1, 1, -2 do
  if gone[kept[i + 1]] then table.remove(kept, i + 1); table.remove(kept, i) end
end
chunked(KEYS[2], kept, 'ZADD')
if #kept > 0 then redis.call('PEXPIRE', KEYS[2], math.ceil(lease_ttl / 500)) end

-- Times are kept relative to now: µs since the epoch are ~1.8e15, where a
-- double has no room left for fractions of the emission interval.
local T = 1000000 / (rate * 0.99)
local ahead = math.max(tonumber(redis.call('GET', KEYS[1]) or '0') - now, 0)
local tat_dirty = false
if give_back > 0 then
  ahead, tat_dirty = math.max(ahead - give_back * T, 0), true
end
if frozen > 0 then
  -- A quota hold: the bucket keeps what it had and fills again after it.
  ahead, tat_dirty = ahead + frozen, true
end
if lost then
  -- The debt the replica recalls, and its leases, until their period ends.
  ahead, tat_dirty = math.max(ahead, recalled_debt), true
  local held = {}
  for i = 1, live_leases do held[2 * i - 1], held[2 * i] = now + lease_ttl, base .. ':r' .. i end
  chunked(KEYS[2], held, 'ZADD')
  if #held > 0 then redis.call('PEXPIRE', KEYS[2], math.ceil(lease_ttl / 500)) end
end
if down > 0 then
  -- What the replica's share may have sent while it paced alone.
  local owed = math.min(down, cap * T) - since_down
  if owed > ahead then ahead, tat_dirty = owed, true end
end
if hold_set then
  -- Gentle resume: one token at the end of the hold, then the rate.
  ahead, tat_dirty = math.max(ahead, held_until - now + (cap - 1) * T), true
end
-- Attempts the replica started on its share are leases from now on,
-- <base>:u<i>, whatever the cap: they are out, and count toward it until
-- they end.
if unleased > 0 then
  local reg = {}
  for i = 1, unleased do reg[2 * i - 1], reg[2 * i] = now + lease_ttl, base .. ':u' .. i end
  chunked(KEYS[2], reg, 'ZADD')
  redis.call('PEXPIRE', KEYS[2], math.ceil(lease_ttl / 500))
  dirty = true
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local inflight = redis.call('ZCARD', KEYS[2])

-- Fair shares. A replica refused a slot waits in KEYS[5] (ZSET mark ->
-- until µs) for a second. While others wait, a replica that holds its
-- share of the concurrency (rounded up over the replicas that want
-- slots) gets no more leases and no tokens ahead, so that its kept leases
-- go back (a client gives them back when an ask for tokens ahead brings
-- none) to the replicas waiting.
local room, others, waiting = conc, 0, false
if want > 0 or want_tokens > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', now)
  others = redis.call('ZCARD', KEYS[5])
  if others > 0 and redis.call('ZSCORE', KEYS[5], mark_name) then others, waiting = others - 1, true end
  if others > 0 then
    local prefix, mine = string.match(base, '^(.*:)[^:]*$'), 0
    for _, id in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
      if string.sub(id, 1, #prefix) == prefix then mine = mine + 1 end
    end
    room = math.max(math.ceil(conc / (others + 1)) - mine, 0)
  end
end

local granted, wait, why = 0, 0, ''
local paused = redis.call('EXISTS', KEYS[4]) == 1
local breaker = 'closed'
if open_until > now then breaker = 'open' elseif open_until > 0 then breaker = 'half-open' end
if paused then
  wait, why = -1, 'paused'
elseif held_until > now then
  wait, why = held_until - now, reason
elseif breaker == 'open' then
  wait, why = open_until - now, 'breaker open'
elseif breaker == 'half-open' and (probe_until > now or inflight > 0) then
  wait, why = -1, 'breaker half-open'
elseif inflight >= conc then
  wait, why = -1, 'concurrency'
else
  local avail = math.floor((cap * T - ahead + 2) / T) -- 2 µs: ahead is stored rounded up
  local k = math.min(want, conc - inflight, avail, room)
  if breaker == 'half-open' then k = math.min(k, 1) end
  if k >= 1 then
    ahead = ahead + k * T
    granted, inflight, dirty = k, inflight + k, true
    local added = {}
    for i = 1, k do added[2 * i - 1], added[2 * i] = now + lease_ttl, base .. ':' .. i end
    chunked(KEYS[2], added, 'ZADD')
    redis.call('PEXPIRE', KEYS[2], math.ceil(lease_ttl / 500))
    if breaker == 'half-open' then probe_until = now + lease_ttl end
    tat_dirty = true
  end
  if granted < want then
    wait = math.max(math.ceil(ahead + T - cap * T), 1)
    if granted == 0 then why = 'rate' end
    -- The probe is out: no time is known until it finishes.
    if inflight >= conc or (breaker == 'half-open' and granted > 0) then wait = -1 end
    if granted == room and room < math.min(want, conc - inflight + granted, avail) then
      wait, why = -1, 'fair share'
    end
  end
end
if want > 0 and why ~= 'paused' then
  if granted < want and (inflight >= conc or why == 'fair share') then
    redis.call('ZADD', KEYS[5], now + 1000000, mark_name)
    redis.call('PEXPIRE', KEYS[5], 2000)
  elseif granted >= want and waiting then
    redis.call('ZREM', KEYS[5], mark_name)
  end
end
local tokens = 0
if want_tokens > 0 and not paused and held_until <= now and breaker == 'closed' and (others == 0 or granted < room) then
  tokens = math.max(math.min(want_tokens, math.floor((cap * T - ahead + 2) / T)), 0)
  if tokens > 0 then ahead, tat_dirty = ahead + tokens * T, true end
end

if tat_dirty and ahead > 0 then
  redis.call('SET', KEYS[1], string.format('%.0f', now + math.ceil(ahead)), 'PX', math.ceil(ahead / 1000) + 1)
end
if dirty or tat_dirty then
  v = v + 1
  local secs = math.floor(now / 1000000)
  st[me] = v .. ':' .. secs
  local stale = {}
  for k, m in pairs(st) do
    if string.sub(k, 1, 2) == 'm:' and tonumber(string.match(m, ':(%d+)$') or '0') < secs - 660 then
      stale[#stale + 1] = k
    end
  end
  if #stale > 0 then redis.call('HDEL', KEYS[3], unpack(stale)) end
  redis.call('HSET', KEYS[3], 'v', v, me, st[me], 'held_until', string.format('%.0f', held_until),
    'hold_start', string.format('%.0f', hold_start), 'reason', reason, 'c429', c429, 'cdns', cdns,
    'rate', tostring(rate), 'streak', streak, 'failures', failures,
    'open_until', string.format('%.0f', open_until), 'probe_until', string.format('%.0f', probe_until))
  local keep = math.max(held_until - now, open_until - now, 0) / 1000 + 3600000
  redis.call('PEXPIRE', KEYS[3], math.ceil(keep))
end
local held = 0
if held_until > now then held = held_until - now end
return {granted, wait, why, inflight, tostring(rate), held, c429, breaker, paused and 1 or 0, tokens,
  mark(me), math.floor(ahead), lost and 1 or 0, (dirty or tat_dirty) and 1 or 0, unleased}
