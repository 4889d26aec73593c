-- The whole directory as JSON: live nodes with their rooms (seats promised counted).
local now = now_ms()
local out = {}
for _, id in ipairs(redis.call('SMEMBERS', p .. 'nodes')) do
  local n = hash(p .. 'node:' .. id)
  if n then
    local rooms = {}
    for _, r in ipairs(redis.call('SMEMBERS', p .. 'node:' .. id .. ':rooms')) do
      local room = hash(p .. 'room:' .. r)
      if room then
        local rk = p .. 'room:' .. r .. ':res'
        local reserved = redis.call('ZCOUNT', rk, '(' .. now, '+inf')
        rooms[#rooms + 1] = { id = r, kind = room.kind, seated = room.seated,
          reserved = tostring(reserved), capacity = room.capacity,
          joinable = room.joinable, udp = room.udp, label = room.label or '{}',
          metadata = room.metadata or '' }
      end
    end
    local nr = p .. 'node:' .. id .. ':res'
    local pending = redis.call('ZCOUNT', nr, '(' .. now, '+inf')
    out[#out + 1] = { id = id, info = n.info, players = n.players, draining = n.draining,
      capacity = n.capacity, reserved = tostring(pending), renewed = n.renewed,
      ttl = tostring(redis.call('PTTL', p .. 'node:' .. id)), rooms = rooms }
  end
end
if #out == 0 then return '[]' end
return cjson.encode(out)
