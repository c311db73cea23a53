// The connection that hears of a cluster node's mailboxes on valkey-glide:
// client tracking (`CLIENT TRACKING ON REDIRECT <self> BCAST PREFIX ...`) on
// a RESP2 connection subscribed to `__redis__:invalidate`. Glide cannot be
// that connection (it never hands a tracking invalidation to the
// application: RESP3 pushes are dropped, and its pub/sub needs RESP3), and
// padlock depends on no other driver, so this is a plain socket that speaks
// the five RESP2 types: the handful of commands above and `PING`, and the
// messages they bring.

import net from "node:net";
import tls from "node:tls";

/** Where and how to connect: made from the glide configuration
 * (`glide.ts`). */
export interface TrackingOptions {
  host: string;
  port: number;
  username?: string;
  password?: string;
  clientName?: string;
  /** TLS options, or undefined for plain TCP. */
  tls?: tls.ConnectionOptions;
}

/** A RESP2 reply: an error reply is an `Error` value, not thrown. */
export type Resp = string | number | null | Error | Resp[];

/** Parses one reply at `at` in `buf`: [reply, next offset], or undefined
 * when the buffer does not hold all of it yet. */
function parse(buf: Buffer, at: number): [Resp, number] | undefined {
  const end = buf.indexOf("\r\n", at);
  if (end < 0) return undefined;
  const kind = buf[at];
  const line = buf.toString("utf8", at + 1, end);
  const next = end + 2;
  switch (kind) {
    case 0x2b: // +
      return [line, next];
    case 0x2d: // -
      return [new Error(line), next];
    case 0x3a: // :
      return [Number(line), next];
    case 0x24: { // $
      const len = Number(line);
      if (len < 0) return [null, next];
      if (buf.length < next + len + 2) return undefined;
      return [buf.toString("utf8", next, next + len), next + len + 2];
    }
    case 0x2a: { // *
      const n = Number(line);
      if (n < 0) return [null, next];
      const items: Resp[] = [];
      let pos = next;
      for (let i = 0; i < n; i++) {
        const got = parse(buf, pos);
        if (got === undefined) return undefined;
        items.push(got[0]);
        pos = got[1];
      }
      return [items, pos];
    }
    default:
      throw new Error(`padlock: not a RESP2 reply (${String.fromCharCode(kind)})`);
  }
}

const encode = (args: (string | number)[]): string =>
  `*${args.length}\r\n` + args.map((a) => `$${Buffer.byteLength(String(a))}\r\n${String(a)}\r\n`).join("");

/** One RESP2 connection: commands out, replies and messages in, in order. */
export class RespConn {
  private buf: Buffer = Buffer.alloc(0);
  private readonly ready: Resp[] = [];
  private waiter: ((r: Resp | undefined) => void) | undefined;
  private failed: Error | undefined;

  private constructor(private readonly socket: net.Socket) {
    socket.on("data", (chunk: Buffer) => {
      this.buf = this.buf.length === 0 ? chunk : Buffer.concat([this.buf, chunk]);
      let at = 0;
      try {
        for (let got = parse(this.buf, at); got !== undefined; got = parse(this.buf, at)) {
          this.ready.push(got[0]);
          at = got[1];
        }
      } catch (e) {
        this.fail(e as Error);
        return;
      }
      this.buf = this.buf.subarray(at);
      this.wake();
    });
    const gone = (e?: Error) => this.fail(e ?? new Error("padlock: tracking connection closed"));
    socket.on("error", gone);
    socket.on("close", () => gone());
  }

  /** Connected (and authenticated, named) within `limit` ms. */
  static async open(o: TrackingOptions, limit: number): Promise<RespConn> {
    const socket = await new Promise<net.Socket>((resolve, reject) => {
      const s =
        o.tls === undefined
          ? net.connect({ host: o.host, port: o.port }, () => resolve(s))
          : tls.connect(
              { host: o.host, port: o.port, ...(net.isIP(o.host) ? {} : { servername: o.host }), ...o.tls },
              () => resolve(s),
            );
      s.setNoDelay(true);
      s.once("error", reject);
      s.setTimeout(limit, () => s.destroy(new Error(`padlock: not connected within ${limit} ms`)));
    });
    socket.setTimeout(0);
    const c = new RespConn(socket);
    try {
      if (o.password !== undefined) {
        await c.command(o.username !== undefined ? ["AUTH", o.username, o.password] : ["AUTH", o.password], limit);
      }
      if (o.clientName !== undefined) await c.command(["CLIENT", "SETNAME", o.clientName], limit);
    } catch (e) {
      c.close();
      throw e;
    }
    return c;
  }

  send(args: (string | number)[]): void {
    if (this.failed !== undefined) throw this.failed;
    this.socket.write(encode(args));
  }

  /** The next reply or message, or undefined if none comes within `ms`. */
  next(ms: number): Promise<Resp | undefined> {
    if (this.ready.length > 0) return Promise.resolve(this.ready.shift() as Resp);
    if (this.failed !== undefined) return Promise.reject(this.failed);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiter = undefined;
        resolve(undefined);
      }, ms);
      this.waiter = (r) => {
        clearTimeout(timer);
        this.waiter = undefined;
        if (r === undefined) reject(this.failed);
        else resolve(r);
      };
    });
  }

  /** One command's reply within `limit` ms; an error reply is thrown. */
  async command(args: (string | number)[], limit: number): Promise<Resp> {
    this.send(args);
    const r = await this.next(limit);
    if (r === undefined) throw new Error(`padlock: no reply to ${String(args[0])} within ${limit} ms`);
    if (r instanceof Error) throw r;
    return r;
  }

  close(): void {
    this.socket.destroy();
  }

  private wake(): void {
    if (this.waiter !== undefined && this.ready.length > 0) this.waiter(this.ready.shift());
  }

  private fail(e: Error): void {
    if (this.failed === undefined) this.failed = e;
    this.waiter?.(undefined);
  }
}

/** The keys a message on `__redis__:invalidate` names; undefined when it
 * names every key (a flush), [] when it is no invalidation. */
export function invalidated(message: Resp): string[] | undefined {
  if (!Array.isArray(message) || message.length !== 3 || message[0] !== "message") return [];
  const keys = message[2];
  if (keys === null) return undefined;
  return Array.isArray(keys) ? keys.map(String) : [];
}

/** A subscribed connection's answer to `PING` (`["pong", ""]`). */
export const isPong = (message: Resp): boolean => Array.isArray(message) && message[0] === "pong";
