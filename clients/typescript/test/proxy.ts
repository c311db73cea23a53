// scripts/faultproxy.py as a child process: loses the reply to a chosen
// command after the server applied it, or goes silent altogether.
import { spawn, type ChildProcess } from "node:child_process";
import { dirname, join, resolve } from "node:path";
import { createInterface, type Interface } from "node:readline";
import { fileURLToPath } from "node:url";

const SCRIPT = join(resolve(dirname(fileURLToPath(import.meta.url)), "../../../.."), "scripts/faultproxy.py");

export class FaultProxy {
  private constructor(
    readonly port: number,
    private readonly proc: ChildProcess,
    private readonly lines: Interface,
  ) {}

  static async start(target: number): Promise<FaultProxy> {
    const proc = spawn("python3", [SCRIPT, String(target)], { stdio: ["pipe", "pipe", "inherit"] });
    const lines = createInterface({ input: proc.stdout! });
    const port = Number(await new Promise<string>((ok) => lines.once("line", ok)));
    return new FaultProxy(port, proc, lines);
  }

  private ask(line: string): Promise<string> {
    const answer = new Promise<string>((ok) => this.lines.once("line", ok));
    this.proc.stdin!.write(line + "\n");
    return answer;
  }

  /** Loses the reply to the next `command` (and all after it on that connection). */
  async drop(command: string, mode: "drop" | "hang" = "drop"): Promise<void> {
    await this.ask(`${mode} ${command}`);
  }

  /** Every connection goes silent, the sockets left open. */
  async blackhole(): Promise<void> {
    await this.ask("blackhole");
  }

  async dropped(): Promise<number> {
    return Number((await this.ask("count")).split(" ")[1]);
  }

  stop(): void {
    this.proc.kill();
  }
}
