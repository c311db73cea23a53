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
-- Each bucket line (`padlock_wait_buckets_usec_lock:le_1000=...,count=...`)
-- as counters Prometheus can rate over its own windows:
-- padlock_wait_buckets_usec_lock_le_1000, ..._count.
for k, line in string.gmatch(info, '(padlock_[%w_]+_buckets_usec_%w+):([^\r]+)') do
  for b, v in string.gmatch(line, '([%w_]+)=(%d+)') do
    out[#out + 1] = k .. '_' .. b
    out[#out + 1] = v
  end
end
-- The hottest keys right now by rank (LOCK.TOP, at most 10): a fixed set
-- of series, padlock_top1_waiters ... padlock_top10_waiters (and
-- _oldest_wait_ms, _holders), never one per key name; LOCK.TOP or
-- `python -m padlock top` name the keys.
local ok, top = pcall(redis.call, 'LOCK.TOP', 'COUNT', 10)
if ok then
  for i, row in ipairs(top) do
    out[#out + 1] = 'padlock_top' .. i .. '_waiters'
    out[#out + 1] = tostring(row[3])
    out[#out + 1] = 'padlock_top' .. i .. '_oldest_wait_ms'
    out[#out + 1] = tostring(row[4])
    out[#out + 1] = 'padlock_top' .. i .. '_holders'
    out[#out + 1] = tostring(row[5])
  end
end
return out
