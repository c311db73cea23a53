// One shape over ioredis and node-redis (`@redis/client` 5): a connection
// of its own for each hold (so a `KEEP` lease lives exactly as long as the
// hold), and integer replies read as strings, so that fences are exact bigints whatever a driver does with numbers.

export type Arg = string | number;

export interface Conn {
  call(args: Arg[]): Promise<unknown>;
  close(): Promise<void>;
}

/** What padlock needs of a client: a dedicated connection on demand. */
export interface Backend {
  open(): Promise<Conn>;
}

/** Errors of a hold's own connection surface through its commands; a
 * listener keeps them from becoming uncaught `error` events. */
interface Emitter {
  on(event: "error", listener: (err: unknown) => void): unknown;
}

const ignore = (): void => undefined;

interface IoRedisLike extends Emitter {
  duplicate(overrides?: Record<string, unknown>): IoRedisLike;
  call(command: string, ...args: Arg[]): Promise<unknown>;
  quit(): Promise<unknown>;
  disconnect(): void;
}

interface NodeRedisLike extends Emitter {
  duplicate(overrides?: Record<string, unknown>): NodeRedisLike;
  connect(): Promise<unknown>;
  sendCommand(args: string[], options?: Record<string, unknown>): Promise<unknown>;
  close?(): Promise<void>;
  quit?(): Promise<unknown>;
  destroy?(): void;
}

/** RESP's integer type (`:`), mapped to a string by node-redis 5. */
const RESP_NUMBER = 58;

function ioredis(client: IoRedisLike): Backend {
  return {
    async open() {
      const conn = client.duplicate({ stringNumbers: true });
      conn.on("error", ignore);
      return {
        call: ([cmd, ...rest]) => conn.call(String(cmd), ...rest),
        close: async () => {
          try {
            await conn.quit();
          } catch {
            conn.disconnect();
          }
        },
      };
    },
  };
}

function nodeRedis(client: NodeRedisLike): Backend {
  return {
    async open() {
      const conn = client.duplicate();
      conn.on("error", ignore);
      await conn.connect();
      const options = { typeMapping: { [RESP_NUMBER]: String } };
      return {
        call: (args) => conn.sendCommand(args.map(String), options),
        close: async () => {
          if (conn.close) await conn.close();
          else if (conn.quit) await conn.quit();
          else conn.destroy?.();
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
