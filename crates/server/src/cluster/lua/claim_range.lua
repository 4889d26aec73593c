-- Claims room-id range ARGV[3] for node ARGV[2] under the lease ARGV[4] (ms): 1 when it is
-- the node's (new, or already its own), 0 when a live node holds it.
local node, range, lease = ARGV[2], ARGV[3], tonumber(ARGV[4])
local key = p .. 'range:' .. range
local holder = redis.call('GET', key)
if holder and holder ~= node then return 0 end
redis.call('SET', key, node, 'PX', lease)
return 1
