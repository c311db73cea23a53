-- INFO padlock as the flat key/value list redis_exporter's `--script`
-- option exports, as redis_script_values{key="padlock_..."}: every counter
-- and gauge under its own name, and each percentile line
-- (`padlock_wait_percentiles_usec_lock:p50=...,p99=...,p99.9=...`) as one
-- value per percentile: padlock_wait_percentiles_usec_lock_p50, _p99, _p99_9;
-- then the hottest keys.
local info = redis.call('INFO', 'padlock')
local out = {}
for k, v in string.gmatch(info, '(padlock_[%w_]+):(%-?%d+)\r') do
  out[#out + 1] = k
  out[#out + 1] = v
end
for k, line in string.gmatch(info, '(padlock_[%w_]+_percentiles_usec_%w+):([^\r]+)') do
  for q, v in string.gmatch(line, 'p([%d%.]+)=([%d%.]+)') do
    out[#out + 1] = k .. '_p' .. string.gsub(q, '%.', '_')
    out[#out + 1] = v
  end
end
-- The hottest keys right now (LOCK.TOP, at most 10: a bounded number of
-- series): padlock_top_waiters:<key> and padlock_top_oldest_wait_ms:<key>.
local ok, top = pcall(redis.call, 'LOCK.TOP', 'COUNT', 10)
if ok then
  for _, row in ipairs(top) do
    out[#out + 1] = 'padlock_top_waiters:' .. row[1]
    out[#out + 1] = tostring(row[3])
    out[#out + 1] = 'padlock_top_oldest_wait_ms:' .. row[1]
    out[#out + 1] = tostring(row[4])
  end
end
return out
