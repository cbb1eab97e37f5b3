/**
 * Issue 39, "one launch path": the exec-server's `process/start` is launched through the server's one backend choice
 * (src/shell/backend-choice.ts, as `serve`'s) and guarded by the git guard. Attack: under Landlock (the exec-server's
 * `--sandbox-backend landlock`), a process started with the older `sandboxPolicy` shape (workspace-write) plants an
 * executable `.git/hooks/pre-commit` in a workspace repository; judged by the host: after the process closed the
 * hook is gone and a host `git commit` there runs nothing.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CONF_BASE } from "../helpers/cleanup.ts";
import { ensureBinary } from "../helpers/binary.ts";
import { ExecClient, workspaceWrite } from "./client.ts";
import { pidsWith, waitFor } from "../helpers/attack.ts";
import { startServer, type StartedServer } from "./codex-harness.ts";

const base = join(CONF_BASE, `exec-launch-${process.pid}`);

/**
 * The server's HOME, outside /tmp: the run's HOME lies under /tmp, a writable root of every workspace-write sandbox,
 * and a user other than root without /run/user/<uid> keeps the programs the executable runs outside the sandbox in
 * ~/.cache/shellmcp, which Landlock then refuses to leave writable (src/carried/portable-shells.ts).
 */
/**
 * Whether process `p` is not a lifeline guard (the guards' argv holds the script, so `pidsWith` finds them beside
 * the leftovers they hold); false for a process gone since it was listed (the guards reap what they kill).
 */
function notGuard(p: number): boolean {
  try {
    return !readFileSync(`/proc/${p}/cmdline`, "utf8").startsWith("shellmcp-guard");
  } catch {
    return false;
  }
}

function serverHome(): string {
  const h = join(base, "home");
  mkdirSync(h, { recursive: true });
  return h;
}

/** The older `sandboxPolicy` shape of `process/start` and the fs methods: workspace-write in `proj`, no network. */
function legacyWorkspaceWrite(proj: string): Record<string, unknown> {
  return {
    sandboxPolicy: {
      type: "workspace-write",
      writable_roots: [],
      network_access: false,
      exclude_tmpdir_env_var: false,
      exclude_slash_tmp: false,
    },
    sandboxPolicyCwd: proj,
    windowsSandboxLevel: "disabled",
  };
}

beforeAll(() => mkdirSync(base, { recursive: true }));
afterAll(() => rmSync(base, { recursive: true, force: true }));

function git(cwd: string, ...args: string[]): { code: number; out: string } {
  const r = Bun.spawnSync(["git", "-c", "user.name=t", "-c", "user.email=t@t", ...args], { cwd, stdout: "pipe", stderr: "pipe" });
  return { code: r.exitCode, out: r.stdout.toString() + r.stderr.toString() };
}

/**
 * The attack of `how`: the Landlock fallback (bubblewrap not found: `SHELLMCP_BWRAP` names a missing file; the
 * exec-server's helper used to choose it itself, `--backend auto`) or the exec-server's `--sandbox-backend landlock`.
 */
async function plantHook(how: "fallback" | "flag"): Promise<void> {
  const server: StartedServer = await startServer(
    [ensureBinary(), "exec-server", ...(how === "flag" ? ["--sandbox-backend", "landlock"] : [])],
    {
      ...process.env,
      HOME: serverHome(),
      CODEX_HOME: join(base, "codex-home"),
      ...(how === "fallback" ? { SHELLMCP_BWRAP: join(base, "no-bwrap") } : {}),
    },
  );
  try {
    // The helper reads its environment (the process's) too: the fallback holds for it as for the server.
    const env: Record<string, string> = how === "fallback" ? { SHELLMCP_BWRAP: join(base, "no-bwrap") } : {};
    await plantIn(server, join(base, `proj-${how}`), join(base, `hook-ran-${how}`), env);
  } finally {
    await server.stop();
  }
}

test(
  "a process/start under the Landlock fallback cannot leave a git hook the user's next commit runs",
  () => plantHook("fallback"),
  60_000,
);
test(
  "a process/start under --sandbox-backend landlock cannot leave a git hook the user's next commit runs",
  () => plantHook("flag"),
  60_000,
);

async function plantIn(server: StartedServer, proj: string, ran: string, extraEnv: Record<string, string>): Promise<void> {
  mkdirSync(proj, { recursive: true });
  expect(git(proj, "init", "-q").code).toBe(0);
  writeFileSync(join(proj, "a.txt"), "a\n");
  const c = await ExecClient.connect(server.url);
  await c.init();
  const hook = join(proj, ".git", "hooks", "pre-commit");
  await c.call("process/start", {
    processId: "plant",
    argv: [
      "/bin/sh",
      "-c",
      `mkdir -p .git/hooks && printf '#!/bin/sh\\ntouch ${ran}\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit && echo planted`,
    ],
    cwd: proj,
    env: { PATH: "/usr/bin:/bin", ...extraEnv },
    tty: false,
    sandbox: legacyWorkspaceWrite(proj),
  });
  const { output } = await c.collect("plant");
  c.close();
  expect(output).toContain("planted"); // the sandbox let it write there (Landlock cannot keep .git read-only)
  expect(existsSync(hook)).toBe(false);
  expect(output).toContain("pre-commit");
  expect(git(proj, "add", "a.txt").code).toBe(0);
  expect(git(proj, "commit", "-q", "-m", "x").code).toBe(0);
  expect(existsSync(ran)).toBe(false);
}

/**
 * The fs helper on the same path: under `--sandbox-backend landlock` (which cannot keep `.git` read-only), an
 * `fs/writeFile` with the older `sandboxPolicy` shape rewrites `.git/config` with a `core.fsmonitor` command, which
 * the user's next `git status` would run on the host. Judged by the host: the method fails with the guard's report,
 * the config is the user's again, and `git status` runs nothing.
 */
test("an fs/writeFile under --sandbox-backend landlock cannot leave a .git/config the user's next git status runs", async () => {
  const server: StartedServer = await startServer([ensureBinary(), "exec-server", "--sandbox-backend", "landlock"], {
    ...process.env,
    HOME: serverHome(),
    CODEX_HOME: join(base, "codex-home"),
  });
  const proj = join(base, "proj-fs");
  const ran = join(base, "fsmonitor-ran");
  try {
    mkdirSync(proj, { recursive: true });
    expect(git(proj, "init", "-q").code).toBe(0);
    const config = join(proj, ".git", "config");
    const before = readFileSync(config, "utf8");
    const c = await ExecClient.connect(server.url);
    await c.init();
    const planted = `${before}[core]\n\tfsmonitor = touch ${ran}\n`;
    const r = await c.request("fs/writeFile", {
      path: config,
      dataBase64: Buffer.from(planted).toString("base64"),
      sandbox: legacyWorkspaceWrite(proj),
    });
    c.close();
    expect(JSON.stringify(r.error ?? null)).toContain("config");
    expect(readFileSync(config, "utf8")).toBe(before);
    expect(git(proj, "status", "--short").code).toBe(0);
    expect(existsSync(ran)).toBe(false);
  } finally {
    await server.stop();
  }
}, 60_000);

/**
 * The lifeline guard on the same path as `serve`'s calls: an exec-server SIGKILLed while its processes run leaves
 * nothing running — not the process, not a grandchild that left its session (`setsid`), sandboxed or not — on a host
 * without per-process cgroups (a non-root user's), where only the guard can end them. Judged by the host's process
 * table (processes found by a tag in their argv). And Codex's meaning stays: a leftover of a process that ended runs
 * on until the process is terminated.
 */
test("nothing a process/start began outlives an exec-server killed with SIGKILL (no per-process cgroups)", async () => {
  const server: StartedServer = await startServer([ensureBinary(), "exec-server"], {
    ...process.env,
    HOME: serverHome(),
    CODEX_HOME: join(base, "codex-home"),
    SHELLMCP_NO_CGROUP: "1",
  });
  const proj = join(base, "proj-lifeline");
  mkdirSync(proj, { recursive: true });
  const tag = `${Math.floor(300 + Math.random() * 1000)}.${process.pid}`;
  const tagged = () => pidsWith(tag).filter(notGuard);
  try {
    const c = await ExecClient.connect(server.url);
    await c.init();
    for (const [id, sandbox] of [
      ["plain", null],
      ["boxed", workspaceWrite(proj)],
    ] as const) {
      await c.call("process/start", {
        processId: id,
        argv: ["/bin/sh", "-c", `setsid sleep ${tag} </dev/null >/dev/null 2>&1 & sleep ${tag} </dev/null >/dev/null 2>&1 & echo up`],
        cwd: proj,
        env: { PATH: "/usr/bin:/bin" },
        tty: false,
        sandbox,
      });
      // The process itself ends at once (exit 0); what it left runs on (Codex's meaning).
      const exited = await c.waitFor((m) => m.method === "process/exited" && (m.params as { processId: string }).processId === id);
      expect(exited.params).toMatchObject({ exitCode: 0 });
      // Its leftovers hold none of its pipes, and neither does the guard: the process closes.
      expect((await c.collect(id)).output).toContain("up");
    }
    // The unsandboxed process's two (a sandboxed one's end with its pid namespace anyway).
    expect(await waitFor(() => tagged().length >= 2, 10_000)).toBe(true);
    server.proc.kill("SIGKILL");
    await server.proc.exited;
    expect(await waitFor(() => tagged().length === 0, 10_000)).toBe(true);
  } finally {
    for (const pid of pidsWith(tag)) process.kill(pid, "SIGKILL");
    await server.stop();
  }
}, 60_000);

/**
 * The same on a terminal (`tty: true`), which Bun's pty spawn used to start without the guard: an exec-server
 * SIGKILLed leaves nothing running — not a grandchild that left the terminal's session (`setsid`), unsandboxed or
 * under Landlock (no pid namespace holds it) — on a host without per-process cgroups. Judged by the host's process
 * table. Codex's meaning stays: when the terminal's program ends, its background job in the terminal's foreground
 * group is hung up (the kernel does it when the session leader ends; the guard leads the session now), the terminal
 * closes, and what left the session runs on until the process is terminated.
 */
test("nothing a tty process/start began outlives an exec-server killed with SIGKILL (no per-process cgroups)", async () => {
  const server: StartedServer = await startServer([ensureBinary(), "exec-server", "--sandbox-backend", "landlock"], {
    ...process.env,
    HOME: serverHome(),
    CODEX_HOME: join(base, "codex-home"),
    SHELLMCP_NO_CGROUP: "1",
  });
  const proj = join(base, "proj-lifeline-tty");
  mkdirSync(proj, { recursive: true });
  const r = Math.floor(300 + Math.random() * 1000);
  const tag = `${r}.${process.pid}`;
  const hup = `${r}7.${process.pid}`; // never contains `tag`, nor `tag` it
  const tagged = () => pidsWith(tag).filter(notGuard);
  try {
    const c = await ExecClient.connect(server.url);
    await c.init();
    // The script ends only once its sleeper leads a session of its own (else the hangup could reach it first).
    const detach = `setsid sleep ${tag} </dev/null >/dev/null 2>&1 & until [ "$(cut -d' ' -f6 /proc/$!/stat)" = "$!" ]; do sleep 0.01; done;`;
    for (const [id, sandbox, script] of [
      ["plain", null, `sleep ${hup} & ${detach} echo up`],
      ["boxed", workspaceWrite(proj), `${detach} echo up`],
    ] as const) {
      await c.call("process/start", {
        processId: id,
        argv: ["/bin/sh", "-c", script],
        cwd: proj,
        env: { PATH: "/usr/bin:/bin" },
        tty: true,
        sandbox,
      });
      const exited = await c.waitFor((m) => m.method === "process/exited" && (m.params as { processId: string }).processId === id);
      expect(exited.params).toMatchObject({ exitCode: 0 });
    }
    // The plain process's background job held the terminal: hung up, it ends, and the terminal closes.
    const { output } = await c.collect("plain");
    expect(output).toContain("up");
    expect(await waitFor(() => pidsWith(hup).filter(notGuard).length === 0, 10_000)).toBe(true);
    // The two that left the session run on (Codex's meaning), under nothing but the guard.
    expect(await waitFor(() => tagged().length >= 2, 10_000)).toBe(true);
    server.proc.kill("SIGKILL");
    await server.proc.exited;
    expect(await waitFor(() => tagged().length === 0, 10_000)).toBe(true);
  } finally {
    for (const pid of [...pidsWith(tag), ...pidsWith(hup)]) process.kill(pid, "SIGKILL");
    await server.stop();
  }
}, 60_000);
