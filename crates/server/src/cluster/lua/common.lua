-- Shared by every script (prepended to each). ARGV[1] is the cluster's key prefix,
-- `tw:{name}:` (the braces make every key of a cluster one hash slot). Ids (players, rooms)
-- travel as strings: Lua numbers are doubles, and JSON in Lua keeps 14 digits.
local p = ARGV[1]

-- Redis's own clock, the one clock every node's reservations are measured by.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function hash(key)
  local h = redis.call('HGETALL', key)
  if #h == 0 then return nil end
  local t = {}
  for i = 1, #h, 2 do t[h[i]] = h[i + 1] end
  return t
end

-- A seat promised to `player` in room `rid` on `node` until now + ttl: in the room's
-- reservations (its free seats), the node's (its load) and the player's own key (a
-- second matchmake finds it).
local function reserve(rid, node, player, now, ttl)
  local expires = now + ttl
  local rk = p .. 'room:' .. rid .. ':res'
  redis.call('ZADD', rk, expires, player)
  redis.call('PEXPIRE', rk, ttl)
  local nk = p .. 'node:' .. node .. ':res'
  redis.call('ZADD', nk, expires, player)
  redis.call('PEXPIRE', nk, ttl)
  redis.call('SET', p .. 'res:' .. player, rid, 'PX', ttl)
end

-- Writes one room's listing under its node's lease; `label` is a JSON object.
local function list_room(node, lease, rid, kind, capacity, seated, joinable, udp, label, metadata)
  local k = p .. 'room:' .. rid
  redis.call('HSET', k, 'node', node, 'kind', kind, 'capacity', capacity, 'seated', seated,
    'joinable', joinable, 'udp', udp, 'label', label, 'metadata', metadata)
  redis.call('PEXPIRE', k, lease)
  local kk = p .. 'kind:' .. kind
  redis.call('SADD', kk, rid)
  redis.call('PEXPIRE', kk, lease)
  local nr = p .. 'node:' .. node .. ':rooms'
  redis.call('SADD', nr, rid)
  redis.call('PEXPIRE', nr, lease)
end
