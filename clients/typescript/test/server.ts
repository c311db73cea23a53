// A real server with the module, on a free loopback port, for the tests.
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { connect, createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before } from "node:test";
import { Redis } from "ioredis";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../../../..");
const SO = process.env.PADLOCK_SO ?? join(ROOT, "target/release/libpadlock.so");
const BINARY = process.env.PADLOCK_SERVER ?? "redis-server";

function freePort(): Promise<number> {
  return new Promise((ok, fail) => {
    const s = createServer();
    s.once("error", fail);
    s.listen(0, "127.0.0.1", () => {
      const address = s.address();
      const port = typeof address === "object" && address ? address.port : 0;
      s.close(() => ok(port));
    });
  });
}

/** True when a server answers PING on `port`. */
function pong(port: number): Promise<boolean> {
  return new Promise((ok) => {
    const sock = connect({ port, host: "127.0.0.1" }, () => sock.write("PING\r\n"));
    sock.once("data", (d) => {
      sock.destroy();
      ok(d.toString().startsWith("+PONG"));
    });
    sock.once("error", () => ok(false));
  });
}

export class TestServer {
  private constructor(
    readonly port: number,
    private readonly proc: ChildProcess,
    private readonly dir: string,
    /** On TLS only: the CA certificate its certificate is signed by, and
     * the password it requires. */
    readonly tls?: { ca: Buffer; password: string },
  ) {}

  /** A server on TLS only, with a password, its certificates made with
   * `openssl` for a CA of its own (undefined without `openssl`). */
  static async startTls(extra: string[] = []): Promise<TestServer | undefined> {
    const dir = mkdtempSync(join(tmpdir(), "padlock-ts-tls-"));
    const ssl = (...args: string[]) => execFileSync("openssl", args, { cwd: dir, stdio: "ignore" });
    try {
      ssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "2", "-subj", "/CN=padlock-test-ca");
      ssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "srv.key", "-out", "srv.csr", "-subj", "/CN=127.0.0.1");
      writeFileSync(join(dir, "ext"), "subjectAltName=IP:127.0.0.1\n");
      ssl("x509", "-req", "-in", "srv.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial", "-out", "srv.crt", "-days", "2", "-extfile", "ext");
    } catch {
      rmSync(dir, { recursive: true, force: true });
      return undefined;
    }
    const port = await freePort();
    const password = "s3cret";
    const proc = spawn(BINARY, ["--port", "0", "--tls-port", String(port), "--bind", "127.0.0.1", "--dir", dir,
      "--save", "", "--appendonly", "no", "--tls-cert-file", "srv.crt", "--tls-key-file", "srv.key",
      "--tls-ca-cert-file", "ca.crt", "--tls-auth-clients", "no", "--requirepass", password,
      "--loadmodule", SO, ...extra], { stdio: "ignore", cwd: dir });
    const server = new TestServer(port, proc, dir, { ca: readFileSync(join(dir, "ca.crt")), password });
    const probe = server.ioredis();
    for (let i = 0; i < 500; i++) {
      if ((await probe.ping().catch(() => "")) === "PONG") return server;
      await new Promise((r) => setTimeout(r, 20));
    }
    await server.stop();
    throw new Error("TLS server did not start");
  }

  /** Starts a server. One whose picked port another process took meanwhile
   * exits at once and is started again on another pick: the suites of
   * `make test` run side by side and start servers too. */
  static async start(extra: string[] = [], binary = BINARY): Promise<TestServer> {
    for (let attempt = 0; attempt < 5; attempt++) {
      const port = await freePort();
      const dir = mkdtempSync(join(tmpdir(), "padlock-ts-"));
      const log = join(dir, "server.log");
      const proc = spawn(binary, ["--port", String(port), "--bind", "127.0.0.1", "--dir", dir, "--logfile", log,
        "--save", "", "--appendonly", "no", "--loadmodule", SO, ...extra], { stdio: "ignore" });
      const server = new TestServer(port, proc, dir);
      for (let i = 0; i < 500 && proc.exitCode === null; i++) {
        if (await pong(port)) return server;
        await new Promise((r) => setTimeout(r, 20));
      }
      const exited = proc.exitCode !== null;
      const text = exited ? readFileSync(log, "utf8") : "";
      if (exited) rmSync(dir, { recursive: true, force: true });
      else await server.stop();
      if (!text.includes("Address already in use")) throw new Error(`server did not start: ${text}`);
    }
    throw new Error("server did not start: its port was taken five times");
  }

  /** Every client handed out, disconnected by `stop`: a test that fails
   * before its own `disconnect` must not leave one reconnecting forever
   * (that keeps the test file's process, and the suite, from ending). */
  private readonly clients: Redis[] = [];

  ioredis(): Redis {
    const tls = this.tls === undefined ? {} : { tls: { ca: this.tls.ca }, password: this.tls.password };
    const c = new Redis({ port: this.port, host: "127.0.0.1", ...tls });
    this.clients.push(c);
    return c;
  }

  /** Sends the server a signal (SIGSTOP: it stops answering, as a lagging replica). */
  signal(sig: NodeJS.Signals): void {
    this.proc.kill(sig);
  }

  async stop(): Promise<void> {
    this.proc.kill("SIGCONT");
    for (const c of this.clients.splice(0)) c.disconnect();
    this.proc.kill("SIGKILL");
    await new Promise((r) => this.proc.once("exit", r));
    rmSync(this.dir, { recursive: true, force: true });
  }
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** One server for a test file: started before its tests with an ioredis
 * client on it (handed to `use`), both stopped after them. */
export function useServer(use: (server: TestServer, r: Redis) => void, cluster = false): void {
  let server: TestServer | undefined;
  let r: Redis | undefined;
  before(async () => {
    server = await TestServer.start(cluster ? CLUSTER : []);
    r = server.ioredis();
    if (cluster) await ownAllSlots(r);
    use(server, r);
  });
  after(async () => {
    r?.disconnect();
    await server?.stop();
  });
}

/** A cluster node's options. */
export const CLUSTER = ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"];

/** Gives the node `admin` speaks to every slot, and waits for the cluster
 * to say it is ok. */
export async function ownAllSlots(admin: Redis): Promise<void> {
  await admin.call("CLUSTER", "ADDSLOTSRANGE", "0", "16383");
  for (let i = 0; i < 200 && !String(await admin.call("CLUSTER", "INFO")).includes("cluster_state:ok"); i++) await sleep(25);
}

/** Three masters of `binary`, node i serving a third of the slots, and an
 * ioredis client on each; once the cluster agrees. */
export async function threeMasters(binary = BINARY): Promise<{ nodes: TestServer[]; admins: Redis[] }> {
  const nodes: TestServer[] = [];
  const admins: Redis[] = [];
  for (let i = 0; i < 3; i++) {
    nodes.push(await TestServer.start(CLUSTER, binary));
    admins.push(nodes[i].ioredis());
    await admins[i].call("CLUSTER", "ADDSLOTSRANGE", String(i * 5462), String(Math.min(16383, i * 5462 + 5461)));
  }
  for (const a of admins.slice(1)) await a.call("CLUSTER", "MEET", "127.0.0.1", String(nodes[0].port));
  for (let i = 0; i < 400; i++) {
    const infos = await Promise.all(admins.map((a) => a.call("CLUSTER", "INFO")));
    if (infos.every((s) => String(s).includes("cluster_state:ok") && String(s).includes("cluster_known_nodes:3"))) break;
    await sleep(25);
  }
  return { nodes, admins };
}
