// valkey-glide (`@valkey/valkey-glide`, the client Valkey recommends) as a
// driver: `glide(GlideClient, config)` or `glide(GlideClusterClient,
// config)` is a `Backend` whose connections are glide clients of padlock's
// own, made from your configuration. Glide's own request timeout would cut
// a server-side wait short, so padlock's clients get the longest one glide
// takes and time every call themselves; they speak RESP2, so that replies
// look as they do on the other drivers. On a cluster holds go node by node
// (`nodesOf`: a standalone client per primary, and a tracking connection of
// `tracking.ts` beside it); the cluster client routes the rest by the
// (first) key's slot.
//
// Glide closes a client's socket a second or more after `close()`: a wait
// abandoned meanwhile could still be granted. So a wait's connection learns
// its `CLIENT ID` first, and one closed while its wait is pending is also
// ended with `CLIENT KILL ID` (when the user may run it; otherwise the
// server drops the wait once glide closes the socket).

import type { Backend, Conn } from "./backend.js";
import { keySlot, routeKey } from "./slots.js";
import { RespConn, type TrackingOptions } from "./tracking.js";

/** What padlock uses of a glide client: custom commands, and close. */
interface GlideLike {
  customCommand(args: string[], options?: Record<string, unknown>): Promise<unknown>;
  close(errorMessage?: string): void;
}

/** `GlideClient` or `GlideClusterClient` (their static `createClient`). */
export interface GlideFactory {
  readonly name: string;
  createClient(config: never): Promise<unknown>;
}

/** Glide's `ProtocolVersion.RESP2`. */
const RESP2 = 1;
/** The longest request timeout glide takes (ms, a signed 32-bit int). */
const LONGEST = 2 ** 31 - 1;

/** An error reply of the server, as the rest of padlock knows it (glide
 * reports those as a plain `RequestError`, connection trouble as its
 * subclasses or `ClosingError`). */
class ReplyError extends Error {
  override name = "ReplyError";
}

/** Error codes glide reports by kind name ("An error was signalled by the
 * server: - TryAgain: ..."), back to the server's own words. */
const CODES: Record<string, string> = { TryAgain: "TRYAGAIN", Moved: "MOVED", Ask: "ASK", ClusterDown: "CLUSTERDOWN", CrossSlot: "CROSSSLOT" };

function translated(err: unknown): unknown {
  const name = (err as { constructor?: { name?: string } } | null)?.constructor?.name;
  if (name !== "RequestError") return err;
  const text = (err as Error).message;
  const kind = /^An error was signalled by the server: - (\w+): ([\s\S]*)$/.exec(text);
  const code = kind === null ? undefined : CODES[kind[1]];
  return new ReplyError(code === undefined || kind === null ? text : `${code} ${kind[2]}`);
}

/** Integers as strings (fences are exact bigints whatever the driver). */
function normal(reply: unknown): unknown {
  if (typeof reply === "number" || typeof reply === "bigint") return String(reply);
  if (Array.isArray(reply)) return reply.map(normal);
  return reply;
}

/** A `Backend` on valkey-glide: `factory` is `GlideClient` (standalone) or
 * `GlideClusterClient`, `config` what you would pass to its
 * `createClient` (addresses, credentials, TLS, ...). `cluster` says which,
 * where a bundler renamed the classes.
 *
 * In a cluster, holds and waits go node by node (`nodeOf`): per primary a
 * standalone `GlideClient` of padlock's own (the keeper) and a tracking
 * connection (`tracking.ts`) that hears of the process's mailboxes there.
 * A configuration that connection cannot be made from (IAM) leaves waits
 * on glide connections of their own and holds watched by reads. */
export function glide(
  factory: GlideFactory,
  config: Record<string, unknown>,
  cluster = factory.name === "GlideClusterClient",
): Backend {
  const backend = glideOn(factory, config, cluster);
  const tracking = cluster ? trackingOf(config) : undefined;
  if (tracking !== undefined) backend.nodeOf = nodesOf(backend, config, tracking);
  return backend;
}

function glideOn(factory: GlideFactory, config: Record<string, unknown>, cluster: boolean, onMoved?: () => void): Backend {
  const make = async () =>
    (await factory.createClient({ ...config, protocol: RESP2, requestTimeout: LONGEST } as never)) as GlideLike;
  const route = (key: string | undefined) =>
    cluster && key !== undefined ? { route: { type: "primarySlotKey", key } } : undefined;
  /** Ends connection `id` (where `key` lives) at once, if allowed. */
  const kill = async (id: string, key: string | undefined) => {
    const control = await make();
    try {
      await control.customCommand(["CLIENT", "KILL", "ID", id], route(key));
    } catch {
      // Not allowed (ACL) or gone already: glide's close ends it later.
    } finally {
      control.close();
    }
  };
  return {
    mailbox: !cluster,
    silentReconnects: true,
    async open(forWait = false): Promise<Conn> {
      const made = await make();
      let pending = 0;
      let waiting: { id: string; key: string | undefined } | undefined;
      return {
        async call(args) {
          const key = cluster ? routeKey(args) : undefined;
          pending++;
          try {
            if (forWait && waiting === undefined) {
              waiting = { id: String(await made.customCommand(["CLIENT", "ID"], route(key))), key };
            }
            return normal(await made.customCommand(args.map(String), route(key)));
          } catch (e) {
            const t = translated(e);
            if (onMoved !== undefined && t instanceof ReplyError && t.message.includes("MOVED")) onMoved();
            throw t;
          } finally {
            pending--;
          }
        },
        async close() {
          made.close();
          if (pending > 0 && waiting !== undefined) await kill(waiting.id, waiting.key);
        },
      };
    },
  };
}

/** The tracking connection's settings (but the address) matching a glide
 * configuration, or undefined when none can match it (IAM). */
function trackingOf(config: Record<string, unknown>): Omit<TrackingOptions, "host" | "port"> | undefined {
  const o: Omit<TrackingOptions, "host" | "port"> = {};
  const cred = config.credentials as { username?: string; password?: string; iamConfig?: unknown } | undefined;
  if (cred !== undefined) {
    if (cred.iamConfig !== undefined || cred.password === undefined) return undefined;
    o.password = cred.password;
    o.username = cred.username;
  }
  if (typeof config.clientName === "string") o.clientName = config.clientName;
  if (config.useTLS === true) {
    const adv = config.advancedConfiguration as
      | { tlsAdvancedConfiguration?: { insecure?: boolean; rootCertificates?: string | Buffer } }
      | undefined;
    const t = adv?.tlsAdvancedConfiguration;
    o.tls = { rejectUnauthorized: t?.insecure !== true, ...(t?.rootCertificates !== undefined ? { ca: t.rootCertificates } : {}) };
  }
  return o;
}

/** What `CLUSTER SLOTS` says: which primary serves which slots. */
type Ranges = { start: number; end: number; host: string; port: number }[];

/** `nodeOf` of a glide cluster backend: the slot map is fetched at the
 * first lookup, and again once a node answered `MOVED` (as a cluster
 * driver refreshes its own); a node's backend is made once. */
function nodesOf(
  clusterBackend: Backend,
  config: Record<string, unknown>,
  tracking: Omit<TrackingOptions, "host" | "port">,
): (key: string) => Promise<Backend> {
  let ranges: Ranges | undefined;
  let fetching: Promise<Ranges> | undefined;
  let standalone: Promise<GlideFactory> | undefined;
  const nodes = new Map<string, Backend>();
  const seed = (config.addresses as { host?: string }[] | undefined)?.[0]?.host ?? "127.0.0.1";
  const resolve = config.addressResolver as ((h: string, p: number) => [string, number]) | undefined;
  const fetch = async (): Promise<Ranges> => {
    const conn = await clusterBackend.open();
    try {
      const rows = (await conn.call(["CLUSTER", "SLOTS"])) as [string, string, [string, string]][];
      return rows.map(([start, end, [host, port]]) => ({
        start: Number(start),
        end: Number(end),
        host: host === "" || host === "?" ? seed : host,
        port: Number(port),
      }));
    } finally {
      await conn.close();
    }
  };
  return async (key) => {
    const slot = keySlot(key);
    if (ranges === undefined) {
      fetching ??= fetch().finally(() => {
        fetching = undefined;
      });
      ranges = await fetching;
    }
    const r = ranges.find((x) => x.start <= slot && slot <= x.end);
    if (r === undefined) throw new ReplyError(`CLUSTERDOWN no node serves slot ${slot}`);
    const [host, port] = resolve !== undefined ? resolve(r.host, r.port) : [r.host, r.port];
    const name = `${host}:${port}`;
    // Imported before the lookup: nothing between it and the store awaits,
    // so tasks that ask at once get one backend (one keeper) per node.
    standalone ??= import("@valkey/valkey-glide" as string).then((m) => (m as { GlideClient: GlideFactory }).GlideClient);
    const GlideClient = await standalone;
    let node = nodes.get(name);
    if (node === undefined) {
      const { periodicChecks: _p, pubsubSubscriptions: _s, ...rest } = config;
      node = glideOn(GlideClient, { ...rest, addresses: [{ host, port }] }, false, () => {
        ranges = undefined;
      });
      node.cluster = true;
      node.mailbox = true;
      node.tracking = (limit: number) => RespConn.open({ ...tracking, host, port }, limit);
      nodes.set(name, node);
    }
    return node;
  };
}
