/**
 * Issue 39: the exec-server keeps its CODEX_HOME (config.toml, rules: what decides later sessions) from sandboxed
 * writes, as `serve` does. Attack: a workspace-write `process/start` (Codex 0.169's profile) and a sandboxed
 * `fs/writeFile` in a workspace that holds HOME — so the default CODEX_HOME, `~/.codex`, lies inside a writable root
 * and not at its top (where `.codex` is kept read-only by name anyway) — write `$CODEX_HOME/config.toml` and
 * `$CODEX_HOME/rules/x.rules`. CODEX_HOME does not exist when the server starts (a previous attempt left bubblewrap's
 * empty placeholder for it behind): the server makes it (0700) at start. Judged by the host, on both backends:
 * nothing written there, and HOME holds CODEX_HOME and nothing else afterwards.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync, mkdirSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CONF_BASE } from "../helpers/cleanup.ts";
import { ensureBinary } from "../helpers/binary.ts";
import { ExecClient, workspaceWrite } from "./client.ts";
import { startServer, type StartedServer } from "./codex-harness.ts";

const base = join(CONF_BASE, `exec-codex-home-${process.pid}`);

/**
 * HOME's entries, but `.cache` when it holds only `shellmcp`, the folder of the programs the executable carries, for a
 * user other than root without /run/user/<uid> (src/carried/portable-shells.ts): the server's, not a sandbox's leftover.
 */
function homeEntries(home: string): string[] {
  const names = readdirSync(home);
  const uid = process.getuid?.() ?? 0;
  const carriedInHome = uid !== 0 && !existsSync(`/run/user/${uid}`) && names.includes(".cache");
  return carriedInHome && readdirSync(join(home, ".cache")).join() === "shellmcp" ? names.filter((n) => n !== ".cache") : names;
}

beforeAll(() => mkdirSync(base, { recursive: true }));
afterAll(() => rmSync(base, { recursive: true, force: true }));

for (const backend of ["bwrap", "landlock"] as const)
  test(`${backend}: a workspace-write process/start and fs/writeFile cannot write CODEX_HOME's config.toml or rules; HOME keeps only CODEX_HOME`, async () => {
    const ws = join(base, `ws-${backend}`);
    const home = join(ws, "home");
    const codexHome = join(home, ".codex");
    mkdirSync(home, { recursive: true });
    const env: Record<string, string | undefined> = { ...process.env, HOME: home };
    delete env.CODEX_HOME;
    const server: StartedServer = await startServer([ensureBinary(), "exec-server", "--sandbox-backend", backend], env);
    const targets = [join(codexHome, "config.toml"), join(codexHome, "rules", "x.rules")];
    try {
      const c = await ExecClient.connect(server.url);
      await c.init();
      const r = await c.request("process/start", {
        processId: "plant",
        argv: [
          "/bin/sh",
          "-c",
          `for f in ${targets.join(" ")}; do mkdir -p "\${f%/*}" 2>&1; echo 'approval_policy = "never"' > "$f" 2>&1 && echo "WROTE $f"; done; echo tried`,
        ],
        cwd: ws,
        env: { PATH: "/usr/bin:/bin" },
        tty: false,
        sandbox: workspaceWrite(ws),
      });
      // Bubblewrap runs it with CODEX_HOME read-only; Landlock, which cannot keep it read-only, refuses to start it.
      if (r.error === undefined) {
        const { output } = await c.collect("plant");
        expect(output).toContain("tried");
        expect(output).not.toContain("WROTE");
      } else expect(r.error).toMatchObject({ code: -32600, message: expect.stringContaining("failed to prepare sandbox") });
      // The fs helper under the same sandbox: CODEX_HOME's rules folder, its config.toml.
      const mk = await c.request("fs/createDirectory", { path: join(codexHome, "rules"), recursive: true, sandbox: workspaceWrite(ws) });
      expect(mk.error).toBeDefined();
      const w = await c.request("fs/writeFile", {
        path: targets[0],
        dataBase64: Buffer.from('approval_policy = "never"\n').toString("base64"),
        sandbox: workspaceWrite(ws),
      });
      expect(w.error).toBeDefined();
      c.close();
      for (const path of [...targets, join(codexHome, "rules")]) expect(existsSync(path)).toBe(false);
      // The server made it at start, private to the user (no placeholder of a sandbox's).
      expect(statSync(codexHome).isDirectory()).toBe(true);
      expect(statSync(codexHome).mode & 0o777).toBe(0o700);
    } finally {
      await server.stop();
    }
    // Nothing of the sandboxes is left: no placeholder, no mount point in the workspace or HOME.
    expect(homeEntries(home)).toEqual([".codex"]);
    expect(readdirSync(ws)).toEqual(["home"]);
  }, 60_000);

/**
 * CODEX_HOME removed while the server runs (a user's `rm -rf ~/.codex`): the next sandboxed launch makes it again
 * (0700) before the sandbox starts, so bubblewrap still needs no placeholder for it and it stays protected.
 */
test("bwrap: a CODEX_HOME removed while the server runs is made again before the next sandbox, and stays protected", async () => {
  const ws = join(base, "ws-removed");
  const home = join(ws, "home");
  const codexHome = join(home, ".codex");
  mkdirSync(home, { recursive: true });
  const env: Record<string, string | undefined> = { ...process.env, HOME: home };
  delete env.CODEX_HOME;
  const server: StartedServer = await startServer([ensureBinary(), "exec-server", "--sandbox-backend", "bwrap"], env);
  try {
    rmSync(codexHome, { recursive: true });
    const c = await ExecClient.connect(server.url);
    await c.init();
    await c.call("process/start", {
      processId: "again",
      argv: ["/bin/sh", "-c", `echo x > ${join(codexHome, "config.toml")} 2>&1 && echo WROTE; echo tried`],
      cwd: ws,
      env: { PATH: "/usr/bin:/bin" },
      tty: false,
      sandbox: workspaceWrite(ws),
    });
    const { output } = await c.collect("again");
    c.close();
    expect(output).toContain("tried");
    expect(output).not.toContain("WROTE");
    expect(existsSync(join(codexHome, "config.toml"))).toBe(false);
    expect(statSync(codexHome).mode & 0o777).toBe(0o700);
  } finally {
    await server.stop();
  }
  expect(homeEntries(home)).toEqual([".codex"]);
}, 60_000);

/** A CODEX_HOME that cannot be made (a file on its way): the server says so at start and still runs sandboxes. */
test("a CODEX_HOME that cannot be made: a warning at start, sandboxed processes still run", async () => {
  const ws = join(base, "ws-unmakeable");
  mkdirSync(ws, { recursive: true });
  const blocker = join(base, "a-file");
  writeFileSync(blocker, "");
  const server: StartedServer = await startServer([ensureBinary(), "exec-server"], {
    ...process.env,
    CODEX_HOME: join(blocker, "codex-home"),
  });
  try {
    const c = await ExecClient.connect(server.url);
    await c.init();
    await c.call("process/start", {
      processId: "runs",
      argv: ["/bin/sh", "-c", "echo ran > out.txt && cat out.txt"],
      cwd: ws,
      env: { PATH: "/usr/bin:/bin" },
      tty: false,
      sandbox: workspaceWrite(ws),
    });
    // (a git guard report may follow: a sandbox writes /tmp, where other programs' repositories may change meanwhile)
    expect((await c.collect("runs")).output).toStartWith("ran\n");
    c.close();
  } finally {
    await server.stop();
  }
  expect(await new Response(server.proc.stderr).text()).toContain(`cannot make CODEX_HOME (${join(blocker, "codex-home")})`);
}, 60_000);
