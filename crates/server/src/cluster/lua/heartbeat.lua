-- The node's lease, renewed with its whole state: its record, every room's listing and its
-- seated players, each under the lease. Idempotent, so the first renewal after Redis comes
-- back (empty) rebuilds the node's part of the directory. Answers 1 when the node was
-- listed, 0 when this renewal listed it anew.
-- ARGV: [2] node, [3] lease ms, [4] info JSON, [5] kinds ",a,b,", [6] players, [7] draining
-- 0/1, [8] capacity, [9] rooms JSON [[id, kind, capacity, seated, joinable, udp, label
-- JSON, metadata], ...]
-- (strings), [10] seated JSON [[player, room], ...] (strings), [11] room-id range.
local node, lease = ARGV[2], tonumber(ARGV[3])
local nk = p .. 'node:' .. node
local existed = redis.call('EXISTS', nk)
redis.call('HSET', nk, 'info', ARGV[4], 'kinds', ARGV[5], 'players', ARGV[6],
  'draining', ARGV[7], 'capacity', ARGV[8], 'range', ARGV[11], 'renewed', now_ms())
redis.call('PEXPIRE', nk, lease)
redis.call('SADD', p .. 'nodes', node)
redis.call('SET', p .. 'range:' .. ARGV[11], node, 'PX', lease)
local nr = nk .. ':rooms'
local listed = {}
for _, r in ipairs(cjson.decode(ARGV[9])) do
  list_room(node, lease, r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8])
  listed[r[1]] = true
end
-- Rooms listed before and gone since without their own removal reaching Redis.
for _, r in ipairs(redis.call('SMEMBERS', nr)) do
  if not listed[r] then
    local room = hash(p .. 'room:' .. r)
    if room and room.node == node then
      redis.call('DEL', p .. 'room:' .. r)
      redis.call('SREM', p .. 'kind:' .. room.kind, r)
    end
    redis.call('SREM', nr, r)
  end
end
local pk = nk .. ':players'
redis.call('DEL', pk)
local seated = cjson.decode(ARGV[10])
for i = 1, #seated, 500 do
  local args = {}
  for j = i, math.min(i + 499, #seated) do
    args[#args + 1] = seated[j][1]
    args[#args + 1] = seated[j][2]
  end
  redis.call('HSET', pk, unpack(args))
end
if #seated > 0 then redis.call('PEXPIRE', pk, lease) end
return existed
