-- A room was disposed of: its listing and reservations go.
-- ARGV: [2] node, [3] room, [4] kind.
local node, rid, kind = ARGV[2], ARGV[3], ARGV[4]
redis.call('DEL', p .. 'room:' .. rid, p .. 'room:' .. rid .. ':res')
redis.call('SREM', p .. 'kind:' .. kind, rid)
redis.call('SREM', p .. 'node:' .. node .. ':rooms', rid)
return 'ok'
