/**
 * `shellmcp exec-server` side by side with `codex exec-server` (0.169) in the same run, over the same websocket
 * client: `process/start` → `process/closed` latency for `/bin/true` (median), output throughput for 100 MB
 * (`head -c 100000000 /dev/zero`, all pushed `process/output` bytes received; median of 3), and server RSS idle and with 20
 * running processes (`sleep`; measured first, before the other runs leave garbage behind). Codex needs file:// URIs and a writable CODEX_HOME outside /tmp; both get plain
 * `sandbox: null` processes. Figures and ratios only, no assertions.
 *
 *   bun bench/exec-server.ts [runs]
 */
import { mkdirSync, readFileSync, rmSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { referenceCodex } from "../test/helpers/reference.ts";
import { median, ROOT } from "./lib.ts";

const RUNS = Number(process.argv[2] ?? 200);
const THROUGHPUT_BYTES = 100_000_000;

interface Server {
  name: string;
  uri: boolean;
  proc: ReturnType<typeof Bun.spawn>;
  url: string;
}

async function start(name: string, argv: string[], env: Record<string, string>, uri: boolean): Promise<Server> {
  const proc = Bun.spawn(argv, { stdin: "ignore", stdout: "pipe", stderr: "ignore", env });
  const reader = (proc.stdout as ReadableStream<Uint8Array>).getReader();
  let buf = "";
  while (!buf.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`${name} exited before printing its URL`);
    buf += new TextDecoder().decode(value);
  }
  return { name, uri, proc, url: buf.split("\n")[0]!.trim() };
}

class Client {
  private waiting = new Map<number, (m: Record<string, unknown>) => void>();
  private id = 1;
  onNote: (m: Record<string, unknown>) => void = () => undefined;
  constructor(readonly ws: WebSocket) {
    ws.onmessage = (ev) => {
      const m = JSON.parse(String(ev.data)) as Record<string, unknown>;
      if ("id" in m) {
        this.waiting.get(m.id as number)?.(m);
        this.waiting.delete(m.id as number);
      } else this.onNote(m);
    };
  }
  static async open(url: string): Promise<Client> {
    const ws = new WebSocket(url);
    await new Promise((r, j) => {
      ws.onopen = r;
      ws.onerror = j;
    });
    const c = new Client(ws);
    await c.call("initialize", { clientName: "bench" });
    ws.send(JSON.stringify({ method: "initialized", params: {} }));
    return c;
  }
  call(method: string, params: unknown): Promise<Record<string, unknown>> {
    const id = this.id++;
    const p = new Promise<Record<string, unknown>>((r) => this.waiting.set(id, r));
    this.ws.send(JSON.stringify({ id, method, params }));
    return p;
  }
}

function rssMb(pid: number): number {
  const m = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return Number(m?.[1] ?? 0) / 1024;
}

async function measure(s: Server): Promise<{ latencyMs: number; mbPerS: number; idleMb: number; busyMb: number }> {
  const c = await Client.open(s.url);
  const cwd = s.uri ? "file:///" : "/";
  const idleMb = rssMb(s.proc.pid);
  let seq = 0;
  const runOne = (argv: string[], onOutput?: (bytes: number) => void) =>
    new Promise<void>((resolve) => {
      const pid = `p${seq++}`;
      c.onNote = (m) => {
        const p = m.params as { processId: string; chunk?: string };
        if (p.processId !== pid) return;
        if (m.method === "process/output" && onOutput) onOutput(Buffer.byteLength(p.chunk!, "base64"));
        if (m.method === "process/closed") resolve();
      };
      void c.call("process/start", { processId: pid, argv, cwd, env: {}, tty: false });
    });
  for (let i = 0; i < 20; i++)
    await c.call("process/start", { processId: `sleep${i}`, argv: ["/bin/sleep", "30"], cwd, env: {}, tty: false });
  await Bun.sleep(300);
  const busyMb = rssMb(s.proc.pid);
  for (let i = 0; i < 20; i++) await c.call("process/terminate", { processId: `sleep${i}` });
  for (let i = 0; i < 10; i++) await runOne(["/bin/true"]);
  const lat: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const t0 = performance.now();
    await runOne(["/bin/true"]);
    lat.push(performance.now() - t0);
  }
  const rates: number[] = [];
  for (let i = 0; i < 3; i++) {
    let got = 0;
    const t0 = performance.now();
    await runOne(["/bin/sh", "-c", `head -c ${THROUGHPUT_BYTES} /dev/zero`], (n) => (got += n));
    rates.push(THROUGHPUT_BYTES / 1e6 / ((performance.now() - t0) / 1000));
    if (got !== THROUGHPUT_BYTES) console.warn(`${s.name}: received ${got} of ${THROUGHPUT_BYTES} bytes`);
  }
  c.ws.close();
  return { latencyMs: median(lat), mbPerS: median(rates), idleMb, busyMb };
}

const ours = await start(
  "shellmcp exec-server",
  // Like for like with Codex's exec-server, which has no authentication: ours generates a token by default.
  [join(ROOT, "dist", "shellmcp"), "exec-server", "--ws-auth", "none"],
  process.env as Record<string, string>,
  false,
);
const results: [string, Awaited<ReturnType<typeof measure>>][] = [["shellmcp exec-server", await measure(ours)]];
ours.proc.kill();
const codex = referenceCodex();
if (codex !== undefined) {
  const home = join(homedir(), ".cache", "shellmcp-bench-codex-home");
  mkdirSync(home, { recursive: true });
  const theirs = await start(
    "codex exec-server 0.169",
    [codex, "exec-server", "--listen", "ws://127.0.0.1:0"],
    { ...(process.env as Record<string, string>), CODEX_HOME: home },
    true,
  );
  results.push(["codex exec-server 0.169", await measure(theirs)]);
  theirs.proc.kill();
  rmSync(home, { recursive: true, force: true });
}

const ref = results[1]?.[1];
const ratio = (a: number, b: number | undefined, higherIsBetter: boolean) =>
  b === undefined ? "" : ` (${(higherIsBetter ? a / b : a / b).toFixed(2)}×)`;
console.log(
  `exec-server, median of ${RUNS} /bin/true runs; ratios against codex (latency/RSS: lower is better; throughput: higher is better)`,
);
for (const [name, r] of results) {
  console.log(
    `${name.padEnd(26)} start→closed ${r.latencyMs.toFixed(2)} ms${ratio(r.latencyMs, ref?.latencyMs, false)}  ` +
      `100 MB ${r.mbPerS.toFixed(0)} MB/s${ratio(r.mbPerS, ref?.mbPerS, true)}  ` +
      `RSS idle ${r.idleMb.toFixed(1)} MB${ratio(r.idleMb, ref?.idleMb, false)}  20 procs ${r.busyMb.toFixed(1)} MB${ratio(r.busyMb, ref?.busyMb, false)}`,
  );
}
if (ref === undefined) console.log("codex not installed (npm i): no ratios");
