// What replies look like, whatever the driver: RESP2 arrays or RESP3 maps.

/** A map reply (RESP3) or a flat field/value array (RESP2) as an object. */
export function asMap(raw: unknown): Record<string, unknown> {
  if (raw === null || raw === undefined) return {};
  if (raw instanceof Map) return Object.fromEntries([...raw].map(([k, v]) => [String(k), v]));
  if (Array.isArray(raw)) {
    const out: Record<string, unknown> = {};
    for (let i = 0; i + 1 < raw.length; i += 2) out[String(raw[i])] = raw[i + 1];
    return out;
  }
  return raw as Record<string, unknown>;
}

