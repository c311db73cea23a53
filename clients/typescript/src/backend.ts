// One shape over ioredis and node-redis (`@redis/client` 5): connections
// of padlock's own (the shared one of `shared.ts`, one per wait), with
// integer replies read as strings, so that fences are exact bigints
// whatever a driver does with numbers.

import type { RespConn } from "./tracking.js";

export type Arg = string | number;

export interface Conn {
  call(args: Arg[]): Promise<unknown>;
  close(): Promise<void>;
  /** Whether the open connection keeps the process alive: a keeper no
   * hold uses stays open for the next acquire without keeping a process
   * whose holds are over from exiting. (Without it, such a keeper is
   * closed at once.) */
  ref?(on: boolean): void;
}

/** What padlock needs of a client: a dedicated connection on demand
 * (`forWait`: one that carries a single server-side wait, then closes). */
export interface Backend {
  open(forWait?: boolean): Promise<Conn>;
  /** Whether waits and losses may go through a mailbox (`MAILBOX`): not in
   * a cluster, where a mailbox must share each request's slot (default
   * true). */
  mailbox?: boolean;
  /** Whether a connection reconnects on its own, silently (glide): its
   * bindings are then checked by `CLIENT ID`, not `PING`. */
  silentReconnects?: boolean;
  /** A cluster's: the backend of the primary that serves `key` (holds and
   * waits then go node by node). */
  nodeOf?(key: string): Promise<Backend>;
  /** A cluster node's: mailboxes are one per slot (`slots.ts`), heard of
   * through client tracking on the connection `tracking` opens. */
  cluster?: boolean;
  tracking?(limit: number): Promise<RespConn>;
}

/** Errors of a hold's own connection surface through its commands; a
 * listener keeps them from becoming uncaught `error` events. */
interface Emitter {
  on(event: "error", listener: (err: unknown) => void): unknown;
}

/** The application's client, which says when it has ended for good
 * (`disconnect()`, `quit()`): padlock's connections made from it end too. */
interface Ending {
  once(event: "end", listener: () => void): unknown;
  off(event: "end", listener: () => void): unknown;
}

/** Closes `close` when `client` ends; the returned function forgets it. */
function endsWith(client: unknown, close: () => void): () => void {
  const c = client as Partial<Ending>;
  if (typeof c.once !== "function" || typeof c.off !== "function") return () => undefined;
  const end = (): void => {
    try {
      close();
    } catch {
      // closed already
    }
  };
  c.once("end", end);
  return () => c.off?.("end", end);
}

const ignore = (): void => undefined;

interface Refable {
  ref(): unknown;
  unref(): unknown;
}

const refTo = (handle: Refable | undefined, on: boolean): void => {
  if (on) handle?.ref();
  else handle?.unref();
};

interface IoRedisLike extends Emitter {
  duplicate(overrides?: Record<string, unknown>): IoRedisLike;
  connect(): Promise<unknown>;
  call(command: string, ...args: Arg[]): Promise<unknown>;
  disconnect(): void;
  /** Its socket, once connected. */
  readonly stream?: Refable;
}

interface NodeRedisLike extends Emitter {
  duplicate(overrides?: Record<string, unknown>): NodeRedisLike;
  readonly options?: { socket?: Record<string, unknown> };
  connect(): Promise<unknown>;
  sendCommand(args: string[], options?: Record<string, unknown>): Promise<unknown>;
  close?(): Promise<void>;
  destroy?(): void;
  ref?(): void;
  unref?(): void;
}

/** RESP's integer type (`:`), mapped to a string by node-redis 5. */
const RESP_NUMBER = 58;

// A hold's connection never resends on its own (padlock resends, with the
// request-id), queues its first command until it is connected whatever the
// client was made with (`enableOfflineQueue: false` included), and does not
// reconnect: a failed one is closed and a fresh one opened.
const IOREDIS_HOLD = {
  stringNumbers: true,
  autoResendUnfulfilledCommands: false,
  maxRetriesPerRequest: 0,
  enableOfflineQueue: true,
  lazyConnect: true,
  retryStrategy: () => null,
};

function ioredis(client: IoRedisLike): Backend {
  return {
    async open(forWait = false) {
      const conn = client.duplicate(IOREDIS_HOLD);
      conn.on("error", ignore);
      await conn.connect();
      // A wait's own connection ends with its wait.
      const forget = forWait ? ignore : endsWith(client, () => conn.disconnect());
      return {
        call: ([cmd, ...rest]) => conn.call(String(cmd), ...rest),
        // At once, not QUIT: a hold's connection is closed when it failed
        // or went silent, and a QUIT there would wait forever.
        close: async () => {
          forget();
          conn.disconnect();
        },
        ref: (on) => refTo(conn.stream, on),
      };
    },
  };
}

function nodeRedis(client: NodeRedisLike): Backend {
  return {
    async open(forWait = false) {
      // No reconnects: a failed connection is closed and a fresh one opened.
      const socket = { ...(client.options?.socket ?? {}), reconnectStrategy: false };
      const conn = client.duplicate({ socket });
      conn.on("error", ignore);
      await conn.connect();
      const options = { typeMapping: { [RESP_NUMBER]: String } };
      const shut = async (): Promise<void> => {
        if (conn.destroy) conn.destroy();
        else if (conn.close) await conn.close();
      };
      const forget = forWait ? ignore : endsWith(client, () => void shut().catch(ignore));
      return {
        call: (args) => conn.sendCommand(args.map(String), options),
        close: async () => {
          forget();
          await shut();
        },
        ref: conn.ref && conn.unref ? (on) => refTo(conn as Refable, on) : undefined,
      };
    },
  };
}

/** An ioredis `Redis`, a node-redis client, or a `Backend` of your own. */
export type Client = object;

export function backendOf(client: Client): Backend {
  const c = client as Record<string, unknown>;
  if (typeof c.open === "function") return client as Backend;
  // ioredis has `sendCommand` too, but only it has `call`.
  if (typeof c.call === "function" && typeof c.duplicate === "function") {
    return ioredis(client as IoRedisLike);
  }
  if (typeof c.sendCommand === "function") return nodeRedis(client as NodeRedisLike);
  throw new TypeError("padlock: pass an ioredis Redis, a node-redis client or a Backend");
}
