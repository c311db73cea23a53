// Cluster slots, for mailboxes in a cluster: a mailbox must share its
// request's slot, and `BLMPOP` cannot wait on keys of two slots, so there a
// process keeps one mailbox per slot in use, named with a short hash tag of
// that slot, and hears of writes to any of them through client tracking on
// one connection per node (`tracking.ts`).

const TABLE = (() => {
  const t = new Uint16Array(256);
  for (let byte = 0; byte < 256; byte++) {
    let crc = byte << 8;
    for (let i = 0; i < 8; i++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    t[byte] = crc;
  }
  return t;
})();

const crc16 = (bytes: Uint8Array): number => {
  let crc = 0;
  for (const b of bytes) crc = ((crc << 8) & 0xffff) ^ TABLE[((crc >> 8) ^ b) & 0xff];
  return crc;
};

/** The cluster slot of `key`: of its hash tag (the first `{...}` with
 * something inside), if it has one. */
export function keySlot(key: string): number {
  let bytes: Uint8Array = Buffer.from(key);
  const open = bytes.indexOf(0x7b);
  if (open >= 0) {
    const close = bytes.indexOf(0x7d, open + 1);
    if (close > open + 1) bytes = bytes.subarray(open + 1, close);
  }
  return crc16(bytes) & 16383;
}

const ALPHABET = Buffer.from("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ");
let tags: string[] | undefined;

/** For each slot, a short alphanumeric hash tag of it, the shortest found
 * first (three characters at most): computed once, by growing candidates
 * one character at a time, one table step each. */
function slotTags(): string[] {
  if (tags !== undefined) return tags;
  const found: (string | undefined)[] = new Array(16384);
  let left = 16384;
  let level: [string, number][] = [["", 0]];
  while (left > 0) {
    const grown: [string, number][] = [];
    for (const [prefix, crc] of level) {
      for (const c of ALPHABET) {
        const n = ((crc << 8) & 0xffff) ^ TABLE[((crc >> 8) ^ c) & 0xff];
        const word = prefix + String.fromCharCode(c);
        grown.push([word, n]);
        if (found[n & 16383] === undefined) {
          found[n & 16383] = word;
          left--;
        }
      }
    }
    level = grown;
  }
  tags = found.map((t) => t ?? "");
  return tags;
}

/** The mailbox of `key`'s slot: `prefix` and a hash tag of that slot. */
export const slotBox = (prefix: string, key: string): string => `${prefix}{${slotTags()[keySlot(key)]}}`;

/** The key a request routes by: the first after `numkeys` for the
 * multi-key commands, the first argument otherwise. */
export function routeKey(args: readonly (string | number)[]): string | undefined {
  const name = String(args[0]).toUpperCase();
  const at = name === "LOCK.MACQUIRE" || name === "LOCK.MRELEASE" ? 2 : 1;
  return args.length > at ? String(args[at]) : undefined;
}
