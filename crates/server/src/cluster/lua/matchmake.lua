-- One matchmake, atomically: the player's held seat or live reservation, else a seat
-- reserved in the fullest joinable room of the kind on a live node that is not draining,
-- else the node a new room should go to (least players, pending reservations counted).
-- ARGV: [2] player, [3] mode (lookup | join | join_or_create | create), [4] kind or room
-- id, [5] reservation ttl in ms, [6] label filter JSON [[key, value, '1' for = or '0' for
-- !=], ...] (join_or_create offers only rooms whose label matches every clause).
-- Answers {status, room, node, udp, kind, node info}; status is held, reserved, create,
-- none, no_room, closed, full or no_node.
local player, mode, target, ttl = ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5])
local filter = cjson.decode(ARGV[6] or '[]')
local now = now_ms()

-- A clause on a key the label lacks holds only for !=, as in the server's own filter.
local function matches(room)
  if #filter == 0 then return true end
  local label = cjson.decode(room.label or '{}')
  for _, clause in ipairs(filter) do
    if (label[clause[1]] == clause[2]) ~= (clause[3] == '1') then return false end
  end
  return true
end

local nodes_cache = {}
local function node(id)
  local n = nodes_cache[id]
  if n == nil then
    local f = redis.call('HMGET', p .. 'node:' .. id, 'draining', 'players', 'kinds', 'capacity')
    if f[2] == false then
      n = false
    else
      n = { draining = f[1] == '1', players = tonumber(f[2]), kinds = f[3] or '',
        capacity = tonumber(f[4] or '0') }
    end
    nodes_cache[id] = n
  end
  return n
end

local function answer(status, rid, room)
  local info = redis.call('HGET', p .. 'node:' .. room.node, 'info')
  return { status, rid, room.node, room.udp, room.kind, info }
end

local function free_seats(rid, room)
  local rk = p .. 'room:' .. rid .. ':res'
  redis.call('ZREMRANGEBYSCORE', rk, '-inf', now)
  return tonumber(room.capacity) - tonumber(room.seated) - redis.call('ZCARD', rk)
end

-- A seat the player holds on a live node: theirs again (reconnection through any node).
local nodes = redis.call('SMEMBERS', p .. 'nodes')
for _, id in ipairs(nodes) do
  if node(id) then
    local rid = redis.call('HGET', p .. 'node:' .. id .. ':players', player)
    if rid then
      local room = hash(p .. 'room:' .. rid)
      if room and room.node == id then return answer('held', rid, room) end
    end
  else
    redis.call('SREM', p .. 'nodes', id)
  end
end

-- A reservation that has not expired: the same seat (a reloaded page asks again).
local rid = redis.call('GET', p .. 'res:' .. player)
if rid then
  local room = hash(p .. 'room:' .. rid)
  local score = room and redis.call('ZSCORE', p .. 'room:' .. rid .. ':res', player)
  if room and score and tonumber(score) > now and node(room.node) then
    return answer('reserved', rid, room)
  end
  redis.call('DEL', p .. 'res:' .. player)
end

if mode == 'lookup' then return { 'none' } end

local function open(room)
  local n = node(room.node)
  return n and not n.draining and room.joinable == '1'
end

if mode == 'join' then
  local room = hash(p .. 'room:' .. target)
  if not room or not node(room.node) then return { 'no_room' } end
  if not open(room) then return { 'closed' } end
  if free_seats(target, room) <= 0 then return { 'full' } end
  reserve(target, room.node, player, now, ttl)
  return answer('reserved', target, room)
end

if mode == 'join_or_create' then
  -- The fullest room with a seat: players meet players.
  local best, best_room, best_free
  local kk = p .. 'kind:' .. target
  for _, r in ipairs(redis.call('SMEMBERS', kk)) do
    local room = hash(p .. 'room:' .. r)
    if not room then
      redis.call('SREM', kk, r)
    elseif open(room) and matches(room) then
      local free = free_seats(r, room)
      if free > 0 and (best == nil or free < best_free
          or (free == best_free and tonumber(r) < tonumber(best))) then
        best, best_room, best_free = r, room, free
      end
    end
  end
  if best then
    reserve(best, best_room.node, player, now, ttl)
    return answer('reserved', best, best_room)
  end
end

-- A new room: on the live node that hosts the kind with the fewest players, counting the
-- seats promised on it (by players, not rooms: a node of many small rooms is not busier
-- than one of few large ones).
local chosen, load
for _, id in ipairs(nodes) do
  local n = node(id)
  if n and not n.draining and string.find(n.kinds, ',' .. target .. ',', 1, true) then
    local rk = p .. 'node:' .. id .. ':res'
    redis.call('ZREMRANGEBYSCORE', rk, '-inf', now)
    local l = n.players + redis.call('ZCARD', rk)
    if (n.capacity == 0 or l < n.capacity)
        and (chosen == nil or l < load or (l == load and id < chosen)) then
      chosen, load = id, l
    end
  end
end
if not chosen then return { 'no_node' } end
-- Counted on the chosen node at once, so a burst of creates spreads over the nodes.
local rk = p .. 'node:' .. chosen .. ':res'
redis.call('ZADD', rk, now + ttl, player)
redis.call('PEXPIRE', rk, ttl)
return { 'create', '', chosen, '', target, redis.call('HGET', p .. 'node:' .. chosen, 'info') }
