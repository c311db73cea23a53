-- INFO padlock as the flat key/value list redis_exporter's `--script`
-- option exports, as redis_script_values{key="padlock_..."}.
local out = {}
for k, v in string.gmatch(redis.call('INFO', 'padlock'), '(padlock_[%w_]+):(%-?%d+)') do
  out[#out + 1] = k
  out[#out + 1] = v
end
return out
