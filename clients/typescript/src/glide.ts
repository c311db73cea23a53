// valkey-glide (`@valkey/valkey-glide`, the client Valkey recommends) as a
// driver: `glide(GlideClient, config)` or `glide(GlideClusterClient,
// config)` is a `Backend` whose connections are glide clients of padlock's
// own, made from your configuration. Glide's own request timeout would cut
// a server-side wait short, so padlock's clients get the longest one glide
// takes and time every call themselves; they speak RESP2, so that replies
// look as they do on the other drivers. In a cluster each command goes to
// the primary of its (first) key's slot.
//
// Glide closes a client's socket a second or more after `close()`: a wait
// abandoned meanwhile could still be granted. So a wait's connection learns
// its `CLIENT ID` first, and one closed while its wait is pending is also
// ended with `CLIENT KILL ID` (when the user may run it; otherwise the
// server drops the wait once glide closes the socket).

import type { Arg, Backend, Conn } from "./backend.js";

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

function translated(err: unknown): unknown {
  const name = (err as { constructor?: { name?: string } } | null)?.constructor?.name;
  return name === "RequestError" ? new ReplyError((err as Error).message) : err;
}

/** Integers as strings (fences are exact bigints whatever the driver). */
function normal(reply: unknown): unknown {
  if (typeof reply === "number" || typeof reply === "bigint") return String(reply);
  if (Array.isArray(reply)) return reply.map(normal);
  return reply;
}

/** The key a command routes by: the first after `numkeys` for the
 * multi-key commands, the first argument otherwise. */
function routeKey(args: Arg[]): string | undefined {
  const name = String(args[0]).toUpperCase();
  const at = name === "LOCK.MACQUIRE" || name === "LOCK.MRELEASE" ? 2 : 1;
  return args.length > at ? String(args[at]) : undefined;
}

/** A `Backend` on valkey-glide: `factory` is `GlideClient` (standalone) or
 * `GlideClusterClient`, `config` what you would pass to its
 * `createClient` (addresses, credentials, TLS, ...). `cluster` says which,
 * where a bundler renamed the classes. */
export function glide(
  factory: GlideFactory,
  config: Record<string, unknown>,
  cluster = factory.name === "GlideClusterClient",
): Backend {
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
            throw translated(e);
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
