// One shape over ioredis and node-redis (`@redis/client` 5): connections
// of padlock's own (the shared one of `shared.ts`, one per wait), with
// integer replies read as strings, so that fences are exact bigints
// whatever a driver does with numbers.

export type Arg = string | number;

export interface Conn {
  call(args: Arg[]): Promise<unknown>;
  close(): Promise<void>;
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
}

/** Errors of a hold's own connection surface through its commands; a
 * listener keeps them from becoming uncaught `error` events. */
interface Emitter {
  on(event: "error", listener: (err: unknown) => void): unknown;
}

const ignore = (): void => undefined;

interface IoRedisLike extends Emitter {
  duplicate(overrides?: Record<string, unknown>): IoRedisLike;
  connect(): Promise<unknown>;
  call(command: string, ...args: Arg[]): Promise<unknown>;
  disconnect(): void;
}

interface NodeRedisLike extends Emitter {
  duplicate(overrides?: Record<string, unknown>): NodeRedisLike;
  readonly options?: { socket?: Record<string, unknown> };
  connect(): Promise<unknown>;
  sendCommand(args: string[], options?: Record<string, unknown>): Promise<unknown>;
  close?(): Promise<void>;
  destroy?(): void;
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
    async open() {
      const conn = client.duplicate(IOREDIS_HOLD);
      conn.on("error", ignore);
      await conn.connect();
      return {
        call: ([cmd, ...rest]) => conn.call(String(cmd), ...rest),
        // At once, not QUIT: a hold's connection is closed when it failed
        // or went silent, and a QUIT there would wait forever.
        close: async () => conn.disconnect(),
      };
    },
  };
}

function nodeRedis(client: NodeRedisLike): Backend {
  return {
    async open() {
      // No reconnects: a failed connection is closed and a fresh one opened.
      const socket = { ...(client.options?.socket ?? {}), reconnectStrategy: false };
      const conn = client.duplicate({ socket });
      conn.on("error", ignore);
      await conn.connect();
      const options = { typeMapping: { [RESP_NUMBER]: String } };
      return {
        call: (args) => conn.sendCommand(args.map(String), options),
        close: async () => {
          if (conn.destroy) conn.destroy();
          else if (conn.close) await conn.close();
        },
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
