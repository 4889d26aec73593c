-- A node that stops cleanly takes itself and its rooms out of the directory.
-- ARGV: [2] node, [3] room-id range.
local node = ARGV[2]
local nk = p .. 'node:' .. node
for _, r in ipairs(redis.call('SMEMBERS', nk .. ':rooms')) do
  local room = hash(p .. 'room:' .. r)
  if room and room.node == node then
    redis.call('DEL', p .. 'room:' .. r, p .. 'room:' .. r .. ':res')
    redis.call('SREM', p .. 'kind:' .. room.kind, r)
  end
end
redis.call('DEL', nk, nk .. ':rooms', nk .. ':players', nk .. ':res')
redis.call('SREM', p .. 'nodes', node)
if redis.call('GET', p .. 'range:' .. ARGV[3]) == node then
  redis.call('DEL', p .. 'range:' .. ARGV[3])
end
return 'ok'
