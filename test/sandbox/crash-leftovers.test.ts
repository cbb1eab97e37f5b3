/**
 * Issue 39, item 3: what a bubblewrap call makes on the host — the empty mount point that keeps a missing `.codex`
 * from being created in the project, and the `shellmcp-deny-*` folder (in the carried programs' folder) holding the empty file bound over a
 * denied file — must not outlive a `serve` killed with SIGKILL past the next start (src/sandbox/linux/mount-markers.ts).
 * Through the compiled binary and a real MCP client, judged by the host's folders: two calls run in two projects,
 * the server is SIGKILLed while they run, the user then puts a file in one project's `.codex`, and a new `serve` starts
 * with the same CODEX_HOME: the other project's empty `.codex` and the deny folders are gone, the filled `.codex` stays.
 * A dead server's approver socket goes too.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { BINARY, homeDir } from "../helpers/binary.ts";
import { codexProfileMeta, startServe, type Session } from "../helpers/mcp.ts";
import { CONF_BASE } from "../helpers/test-dirs.ts";
import { shellsMissing } from "../helpers/shells.ts";
import { skipWithout } from "../helpers/prereq.ts";
import { portableShellBases } from "../../src/carried/portable-shells.ts";

const skip = skipWithout(
  "crash leftovers suite",
  shellsMissing() ?? (Bun.which("bwrap") === null ? "bubblewrap not installed" : undefined),
);

const base = mkdtempSync(join(CONF_BASE, "crash-leftovers-"));
const codexHome = homeDir();
const tmp = join(base, "tmp");
const projA = join(base, "a");
const projB = join(base, "b");
const sessions: Session[] = [];

afterAll(async () => {
  for (const s of sessions) await s.close().catch(() => {});
  rmSync(base, { recursive: true, force: true });
  rmSync(codexHome, { recursive: true, force: true });
});

/** The `_meta` of a call in `proj` whose profile writes `proj`, keeps its `.codex` read-only and denies its `key.pem` (Codex 0.169's shape). */
const meta = (proj: string) =>
  codexProfileMeta(proj, [
    { path: proj, access: "write" },
    { path: join(proj, "key.pem"), access: "deny" },
    // missing: an empty read-only mount point keeps it from being created (as Codex's `.codex` carve-out)
    { path: join(proj, ".codex"), access: "read" },
  ]);

/**
 * Where the servers put their deny folders: the carried programs' folder (src/sandbox/linux/mount-points.ts
 * `denyDir`), the first of the user's bases that exists (shared by every server of the user: `/run/shellmcp` for root).
 */
const denyBase = () => portableShellBases(process.getuid!(), codexHome).find((b) => existsSync(b)) ?? tmp;
/** Deny folders there now (others' too: see {@link madeByCrashed}). */
const denyDirs = () => readdirSync(denyBase()).filter((n) => n.startsWith("shellmcp-deny-"));
/** The deny folders the crashed server made (new since its start): those the next start must remove. */
let madeByCrashed: string[] = [];

async function until(what: () => boolean, ms = 20_000): Promise<boolean> {
  const end = Date.now() + ms;
  while (!what()) {
    if (Date.now() > end) return false;
    await Bun.sleep(25);
  }
  return true;
}

/** Run a call in each project under a `serve`, SIGKILL it while they run; returns its pid. */
async function crashServe(): Promise<number> {
  for (const p of [projA, projB, tmp]) mkdirSync(p, { recursive: true });
  const before = new Set(existsSync(denyBase()) ? denyDirs() : []);
  const made = () => denyDirs().filter((n) => !before.has(n));
  for (const p of [projA, projB]) writeFileSync(join(p, "key.pem"), "secret\n");
  const s = await startServe({ codexHome, env: { TMPDIR: tmp }, args: ["--approver"] });
  sessions.push(s);
  const pid = (s.client.transport as StdioClientTransport).pid!;
  expect(pid).toBeGreaterThan(0);
  for (const proj of [projA, projB])
    void s.client
      .callTool({ name: "shell", arguments: { command: "sleep 60", workdir: proj, login: false }, _meta: meta(proj) }, undefined, {
        timeout: 90_000,
      })
      .catch(() => {});
  // Both sandboxes run: their mount points and deny folders exist on the host.
  expect(await until(() => existsSync(join(projA, ".codex")) && existsSync(join(projB, ".codex")) && made().length >= 2)).toBe(true);
  expect(existsSync(join(codexHome, "approvals", `${pid}.sock`))).toBe(true);
  process.kill(pid, "SIGKILL");
  await until(() => !existsSync(`/proc/${pid}`));
  // The sandboxes die with it (the lifeline guard); what they stood on stays behind.
  await Bun.sleep(300);
  expect(existsSync(join(projA, ".codex"))).toBe(true);
  madeByCrashed = made();
  expect(madeByCrashed.length).toBeGreaterThanOrEqual(2);
  return pid;
}

/** After {@link crashServe} and the next start: the empty leftovers are gone, what the user filled stays. */
async function expectSwept(pid: number): Promise<void> {
  expect(existsSync(join(projA, ".codex"))).toBe(false);
  expect(existsSync(join(projB, ".codex", "mine.toml"))).toBe(true);
  expect(madeByCrashed.filter((n) => existsSync(join(denyBase(), n)))).toEqual([]);
  expect(await until(() => !existsSync(join(codexHome, "approvals", `${pid}.sock`)), 5000)).toBe(true);
  // No marker of the dead server (or of its sandbox helpers) is left.
  expect(readdirSync(join(codexHome, "sandbox-mounts")).filter((n) => n !== "lock")).toEqual([]);
  rmSync(join(projB, ".codex"), { recursive: true });
}

describe.skipIf(skip)("a SIGKILLed serve's host leftovers", () => {
  test("gone after the next serve start; a .codex the user filled stays; dead approver sockets go", async () => {
    const pid = await crashServe();
    writeFileSync(join(projB, ".codex", "mine.toml"), "# the user's\n");
    const next = await startServe({ codexHome, env: { TMPDIR: tmp } });
    sessions.push(next);
    const r = await next.shell({ command: "true", workdir: base, login: false });
    expect(r.out.exit_code).toBe(0);
    await expectSwept(pid);
  }, 120_000);

  test("gone after the next exec-server start too", async () => {
    const pid = await crashServe();
    writeFileSync(join(projB, ".codex", "mine.toml"), "# the user's\n");
    const x = Bun.spawnSync([BINARY, "exec-server", "--listen", "stdio"], {
      env: { PATH: "/usr/bin:/bin", HOME: codexHome, CODEX_HOME: codexHome, TMPDIR: tmp },
      stdin: "ignore",
      timeout: 30_000,
    });
    expect(x.exitCode).toBe(0);
    await expectSwept(pid);
  }, 120_000);
});
