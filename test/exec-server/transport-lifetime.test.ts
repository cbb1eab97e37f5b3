/**
 * `shellmcp exec-server` transports and lifetime through the compiled binary: `--listen stdio` (JSON lines, nothing
 * else on stdout, ends at stdin EOF killing its processes) also driven by the real Codex 0.169 (`program`/`args` in
 * environments.toml); a server killed with SIGKILL leaves nothing running — not the process, not its background
 * job, not a grandchild that called `setsid` — and no cgroup folder; `--concurrent-requests`;
 * `--exit-on-stdin-close`; `--remote`/`forward` refused as OpenAI's cloud; `--linux-sandbox-pid-namespace`.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { ensureBinary, run } from "../helpers/binary.ts";
import { CONF_BASE } from "../helpers/cleanup.ts";
import { skipWithout } from "../helpers/prereq.ts";
import { ExecClient, workspaceWrite } from "./client.ts";
import { CODEX, runCodex, startServer, withCodexHome, type StartedServer } from "./codex-harness.ts";

const servers: StartedServer[] = [];
afterAll(async () => {
  for (const s of servers) await s.stop();
});

/** Live (non-zombie) pids whose environment has `SMCP_MARK=<marker>` (every descendant inherits it). */
function processesWith(marker: string): string[] {
  const out: string[] = [];
  for (const pid of readdirSync("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const env = readFileSync(`/proc/${pid}/environ`, "utf8").split("\0");
      const state = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.[0];
      const cmd = readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ");
      // The lifeline guard (same environment) holds the process's leftovers; it is not one of them.
      if (env.includes(`SMCP_MARK=${marker}`) && state !== "Z" && !cmd.startsWith("shellmcp-guard")) out.push(`${pid}: ${cmd}`);
    } catch {
      // gone
    }
  }
  return out;
}

async function until(cond: () => boolean, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (cond()) return true;
    await Bun.sleep(50);
  }
  return cond();
}

/** The folder of a server's per-process cgroups (src/shell/cgroup.ts layout), if the host has one. */
function cgroupBaseOf(pid: number): string | undefined {
  const self = readFileSync("/proc/self/cgroup", "utf8")
    .split("\n")
    .find((l) => l.startsWith("0::"));
  const mount = readFileSync("/proc/self/mountinfo", "utf8")
    .split("\n")
    .map((l) => l.split(" - "))
    .find(([, t]) => t?.startsWith("cgroup2 "))?.[0]
    ?.split(" ");
  if (self === undefined || mount === undefined) return undefined;
  const rel = mount[3] === "/" ? self.slice(3) : self.slice(3).slice(mount[3]!.length);
  return `${mount[4]}${rel === "/" ? "" : rel}/shellmcp-${pid}`;
}

describe("exec-server dies with its processes", () => {
  test("SIGKILL of the server ends the process, its background job and a setsid grandchild; the cgroup folder goes", async () => {
    const marker = `smcp-orphan-${process.pid}`;
    const s = await startServer();
    servers.push(s);
    const c = await ExecClient.connect(s.url);
    await c.init();
    // Three sleepers: exec'd, backgrounded, and detached with setsid (its own session and process group).
    const script = "sleep 301 & setsid sleep 302 </dev/null >/dev/null 2>&1 & echo started; exec sleep 303";
    await c.call("process/start", {
      processId: "p",
      argv: ["/bin/sh", "-c", script],
      cwd: "/",
      env: { PATH: "/usr/bin:/bin", SMCP_MARK: marker },
      tty: false,
    });
    await c.waitFor((m) => m.method === "process/output");
    // All three running (`setsid` may still be itself, not yet `sleep 302`, right after the output: wait for it).
    const running = () => ["sleep 301", "sleep 302", "sleep 303"].every((n) => processesWith(marker).some((p) => p.includes(n)));
    expect(await until(running, 5000)).toBe(true);
    const base = cgroupBaseOf(s.proc.pid);
    s.proc.kill("SIGKILL");
    await s.proc.exited;
    const gone = await until(() => processesWith(marker).length === 0, 5000);
    expect(processesWith(marker)).toEqual([]);
    expect(gone).toBe(true);
    if (base !== undefined) expect(await until(() => !existsSync(base), 5000)).toBe(true);
  });

  test("stdio: stdin EOF ends the server and everything it started", async () => {
    const marker = `smcp-stdio-${process.pid}`;
    const proc = Bun.spawn([ensureBinary(), "exec-server", "--listen", "stdio"], {
      stdin: "pipe",
      stdout: "pipe",
      stderr: "pipe",
      env: withCodexHome(),
    });
    const lines: Record<string, unknown>[] = [];
    const reader = (async () => {
      let buf = "";
      for await (const chunk of proc.stdout) {
        buf += new TextDecoder().decode(chunk);
        let nl: number;
        while ((nl = buf.indexOf("\n")) >= 0) {
          lines.push(JSON.parse(buf.slice(0, nl)) as Record<string, unknown>);
          buf = buf.slice(nl + 1);
        }
      }
    })();
    const send = (m: unknown) => proc.stdin.write(JSON.stringify(m) + "\n");
    await send({ id: 1, method: "initialize", params: { clientName: "t" } });
    expect(await until(() => lines.length >= 1, 5000)).toBe(true);
    expect((lines[0]!.result as { sessionId: string }).sessionId).toMatch(/^[0-9a-f-]{36}$/);
    await send({ method: "initialized", params: {} });
    await send({
      id: 2,
      method: "process/start",
      params: {
        processId: "p",
        argv: ["/bin/sh", "-c", "echo hi; setsid sleep 304 </dev/null >/dev/null 2>&1 & true"],
        cwd: "/",
        env: { PATH: "/usr/bin:/bin", SMCP_MARK: marker },
        tty: false,
      },
    });
    await proc.stdin.write("not json\n");
    await send({ id: 3, method: "no/such", params: {} });
    expect(await until(() => lines.some((l) => l.id === 3), 5000)).toBe(true);
    expect(lines.find((l) => l.id === -1)?.error).toMatchObject({ code: -32600 });
    expect(String((lines.find((l) => l.id === -1)?.error as { message: string }).message)).toStartWith(
      "failed to parse JSON-RPC message from exec-server stdio: ",
    );
    expect(lines.find((l) => l.id === 3)?.error).toEqual({ code: -32601, message: "exec-server stub does not implement `no/such` yet" });
    expect(await until(() => processesWith(marker).length === 1, 5000)).toBe(true);
    expect(lines.every((l) => !("jsonrpc" in l))).toBe(true);
    await proc.stdin.end();
    expect(await proc.exited).toBe(0);
    await reader;
    expect(await until(() => processesWith(marker).length === 0, 5000)).toBe(true);
  });
});

describe("exec-server options", () => {
  test("--concurrent-requests 2 answers a request while another waits; the default 1 handles them in order", async () => {
    for (const [args, overtakes] of [
      [[], false],
      [["--concurrent-requests", "2"], true],
    ] as const) {
      const s = await startServer([ensureBinary(), "exec-server", ...args]);
      servers.push(s);
      const c = await ExecClient.connect(s.url);
      await c.init();
      await c.call("process/start", { processId: "p", argv: ["/bin/sleep", "5"], cwd: "/", env: {}, tty: false });
      const order: string[] = [];
      const slow = c.request("process/read", { processId: "p", afterSeq: 0, waitMs: 1500 }).then(() => order.push("read"));
      const fast = c.request("environment/info", {}).then(() => order.push("info"));
      await Promise.all([slow, fast]);
      expect(order).toEqual(overtakes ? ["info", "read"] : ["read", "info"]);
      c.close();
    }
    const r = run([ensureBinary(), "exec-server", "--concurrent-requests", "0"]);
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain("error: invalid value '0' for '--concurrent-requests <COUNT>': number would be zero for non-zero type");
  });

  test("--exit-on-stdin-close: the websocket server exits when its stdin closes", async () => {
    const proc = Bun.spawn([ensureBinary(), "exec-server", "--exit-on-stdin-close"], {
      stdin: "pipe",
      stdout: "pipe",
      stderr: "pipe",
      env: withCodexHome(),
    });
    const reader = proc.stdout.getReader();
    const { value } = await reader.read();
    expect(new TextDecoder().decode(value)).toMatch(/^ws:\/\/127\.0\.0\.1:\d+\n$/);
    await proc.stdin.end();
    expect(await proc.exited).toBe(0);
  });

  test("--remote, its flags and `forward` are refused as OpenAI's cloud", () => {
    for (const args of [
      ["--remote", "https://example.invalid"],
      ["--environment-id", "x"],
      ["--chatgpt-token-stdin"],
      ["forward", "--connect", "ws://127.0.0.1:1"],
    ]) {
      const r = run([ensureBinary(), "exec-server", ...args]);
      expect(r.exitCode).toBe(2);
      expect(r.stderr).toContain("OpenAI's cloud");
      expect(r.stderr).toContain("out of scope");
    }
  });

  test("-c, --enable/--disable (0.169's feature names), --strict-config, --linux-sandbox-pid-namespace", async () => {
    const bad = run([ensureBinary(), "exec-server", "--enable", "no_such_feature"]);
    expect(bad.stderr).toContain("Unknown feature flag: no_such_feature");
    const pidNs = run([ensureBinary(), "exec-server", "--linux-sandbox-pid-namespace", "shared"]);
    expect(pidNs.exitCode).toBe(2);
    expect(pidNs.stderr).toContain(
      "error: invalid value 'shared' for '--linux-sandbox-pid-namespace <MODE>': expected 'isolate' or 'inherit'",
    );
    const s = await startServer([
      ensureBinary(),
      "exec-server",
      "-c",
      'model="o3"',
      "--enable",
      "unified_exec",
      "--disable",
      "shell_snapshot",
      "--strict-config",
      "--proxy-private-ips-via-upstream",
      "--linux-sandbox-pid-namespace",
      "isolate",
    ]);
    servers.push(s);
    expect(s.url).toMatch(/^ws:\/\//);
  });
});

describe("--linux-sandbox-pid-namespace", () => {
  test("isolate: a sandboxed process sees only its own pid namespace; inherit: it sees the host's", async () => {
    const results: Record<string, string> = {};
    for (const mode of ["isolate", "inherit"]) {
      const s = await startServer([ensureBinary(), "exec-server", "--linux-sandbox-pid-namespace", mode]);
      servers.push(s);
      const c = await ExecClient.connect(s.url);
      await c.init();
      const proj = CONF_BASE;
      await c.call("process/start", {
        processId: "p",
        argv: ["/bin/sh", "-c", `kill -0 ${s.proc.pid} 2>/dev/null && echo sees-server || echo isolated`],
        cwd: proj,
        env: { PATH: "/usr/bin:/bin" },
        tty: false,
        sandbox: workspaceWrite(proj),
      });
      results[mode] = (await c.collect("p")).output.trim();
      c.close();
    }
    expect(results).toEqual({ isolate: "isolated", inherit: "sees-server" });
  });
});

const maybeCodex = skipWithout(
  "real Codex exec-server stdio suite",
  CODEX === undefined ? "@openai/codex (0.169, linux build) is not installed: npm ci" : undefined,
)
  ? describe.skip
  : describe;

maybeCodex("real Codex 0.169 spawning `shellmcp exec-server --listen stdio`", () => {
  test("a turn runs through the stdio server Codex starts from environments.toml (program/args)", async () => {
    const r = await runCodex({
      serverUrl: "unused",
      sandbox: "workspace-write",
      steps: ({ proj }) => [{ tool: "exec_command", args: { cmd: "echo via-stdio; echo x > inside.txt", workdir: proj } }],
      environmentsToml: () =>
        `default = "box"\ninclude_local = false\n\n[[environments]]\nid = "box"\nprogram = "${ensureBinary()}"\nargs = ["exec-server", "--listen", "stdio"]\n`,
    });
    expect(r.mock.output(0)).toContain("via-stdio");
    expect(r.mock.output(0)).toContain("Process exited with code 0");
    expect(readFileSync(`${r.proj}/inside.txt`, "utf8")).toBe("x\n");
  }, 120_000);
});
