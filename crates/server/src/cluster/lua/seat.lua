-- A player took (seated = 1) or left (0) their seat on this node: the node's players, the
-- room's count, and the reservation it redeemed.
-- ARGV: [2] node, [3] room, [4] player, [5] players seated in the room, [6] players on the
-- node, [7] lease ms, [8] 1 seated / 0 left.
local node, rid, player, seated = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local players, lease, took = ARGV[6], tonumber(ARGV[7]), ARGV[8] == '1'
local pk = p .. 'node:' .. node .. ':players'
if took then
  redis.call('HSET', pk, player, rid)
  redis.call('PEXPIRE', pk, lease)
  redis.call('ZREM', p .. 'room:' .. rid .. ':res', player)
  redis.call('ZREM', p .. 'node:' .. node .. ':res', player)
  if redis.call('GET', p .. 'res:' .. player) == rid then
    redis.call('DEL', p .. 'res:' .. player)
  end
else
  redis.call('HDEL', pk, player)
end
if redis.call('EXISTS', p .. 'room:' .. rid) == 1 then
  redis.call('HSET', p .. 'room:' .. rid, 'seated', seated)
end
if redis.call('EXISTS', p .. 'node:' .. node) == 1 then
  redis.call('HSET', p .. 'node:' .. node, 'players', players)
end
return 'ok'
