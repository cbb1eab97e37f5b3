/**
 * Issue 40, "no Bun start on the per-call path": the exec-server's sandboxed `process/start` (pipes and terminal,
 * under bubblewrap and Landlock) is launched as `serve`'s calls are — bubblewrap started directly with its seccomp
 * program at an fd, or sandbox-exec under Landlock — so no copy of this executable runs as the sandbox helper
 * (`codex-linux-sandbox`, `--codex-run-as-linux-sandbox`) while the process runs. Judged by the host's process table:
 * the server's descendants while a sandboxed `sleep` runs.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdirSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { CONF_BASE } from "../helpers/cleanup.ts";
import { ensureBinary } from "../helpers/binary.ts";
import { pidsWith, waitFor } from "../helpers/attack.ts";
import { ExecClient, workspaceWrite } from "./client.ts";
import { startServer, type StartedServer } from "./codex-harness.ts";

const base = join(CONF_BASE, `exec-direct-${process.pid}`);

/**
 * The server's HOME, outside /tmp: the run's HOME lies under /tmp, a writable root of every workspace-write sandbox,
 * and a user other than root without /run/user/<uid> keeps the programs the executable runs outside the sandbox in
 * ~/.cache/shellmcp, which Landlock then refuses to leave writable (src/carried/portable-shells.ts).
 */
function serverHome(): string {
  const h = join(base, "home");
  mkdirSync(h, { recursive: true });
  return h;
}

beforeAll(() => mkdirSync(base, { recursive: true }));
afterAll(() => rmSync(base, { recursive: true, force: true }));

/** The command lines (NUL-separated argv) of every descendant of `root`, from /proc. */
function descendantCmdlines(root: number): string[] {
  const children = new Map<number, number[]>();
  for (const e of readdirSync("/proc")) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const stat = readFileSync(`/proc/${e}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      children.set(ppid, [...(children.get(ppid) ?? []), Number(e)]);
    } catch {
      // ended meanwhile
    }
  }
  const out: string[] = [];
  const todo = [...(children.get(root) ?? [])];
  while (todo.length > 0) {
    const p = todo.pop()!;
    try {
      out.push(readFileSync(`/proc/${p}/cmdline`, "utf8"));
    } catch {
      // ended meanwhile
    }
    todo.push(...(children.get(p) ?? []));
  }
  return out;
}

for (const backend of ["bwrap", "landlock"] as const)
  for (const tty of [false, true])
    test(`${backend}, tty ${tty}: a sandboxed process/start runs under no sandbox helper of ours (no Bun start)`, async () => {
      const server: StartedServer = await startServer([ensureBinary(), "exec-server", "--sandbox-backend", backend], {
        ...process.env,
        HOME: serverHome(),
        CODEX_HOME: join(base, `codex-home-${backend}`),
      });
      const proj = join(base, `proj-${backend}-${tty}`);
      mkdirSync(proj, { recursive: true });
      const tag = `${Math.floor(300 + Math.random() * 1000)}.${process.pid}`;
      try {
        const c = await ExecClient.connect(server.url);
        await c.init();
        await c.call("process/start", {
          processId: "sleeper",
          argv: ["/bin/sleep", tag],
          cwd: proj,
          env: { PATH: "/usr/bin:/bin" },
          tty,
          sandbox: workspaceWrite(proj),
        });
        expect(await waitFor(() => pidsWith(tag).length > 0, 10_000)).toBe(true);
        const tree = descendantCmdlines(server.proc.pid);
        expect(tree.some((a) => a.includes(tag))).toBe(true); // the sleeper is the server's
        expect(tree.filter((a) => a.startsWith("codex-linux-sandbox") || a.includes("--codex-run-as-linux-sandbox"))).toEqual([]);
        expect(await c.call("process/terminate", { processId: "sleeper" })).toEqual({ running: true });
        await c.collect("sleeper");
        c.close();
      } finally {
        for (const pid of pidsWith(tag)) process.kill(pid, "SIGKILL");
        await server.stop();
      }
    }, 60_000);
