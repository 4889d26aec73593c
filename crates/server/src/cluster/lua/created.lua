-- The node that created a room lists it, reserves its first seat, and answers the create
-- request that asked for it.
-- ARGV: [2] node, [3] room, [4] kind, [5] capacity, [6] udp, [7] lease ms, [8] player or
-- '', [9] reservation ttl ms, [10] create request id or '', [11] label JSON, [12] metadata.
local node, rid, kind, capacity, udp = ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local lease, player, ttl, request = tonumber(ARGV[7]), ARGV[8], tonumber(ARGV[9]), ARGV[10]
list_room(node, lease, rid, kind, capacity, 0, '1', udp, ARGV[11], ARGV[12])
if player ~= '' then reserve(rid, node, player, now_ms(), ttl) end
if request ~= '' then
  redis.call('SET', p .. 'create:' .. request, 'room:' .. rid, 'XX', 'PX', 60000)
end
return 'ok'
