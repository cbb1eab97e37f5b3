/**
 * Issue 39, item 3 ("removed only when no live holder remains"): two servers sharing a workspace (and CODEX_HOME)
 * need the same empty mount point for the project's missing `.codex`. Server A makes it; server B finds it there.
 * Before the fix, B took it for a real folder and A removed it when A's call ended — while B's sandbox still stood on
 * it: the kernel detached B's read-only bind, and B's command could then create `.codex` (Codex's protected config
 * folder) in the project. Through the compiled binary and real MCP clients, judged by the host's folders: after A's
 * call ends, B's command runs `mkdir -p .codex/pwned`; the host must not get `.codex/pwned`, the placeholder stays
 * while B runs, and the last holder (B) removes it.
 *
 * Servers with different CODEX_HOMEs do not see each other's markers: A makes `.codex`, B (another CODEX_HOME)
 * finds an empty folder no marker of its own names and binds it. Before the folder locks (a shared `flock` on the
 * folder held by every process whose sandbox stands on it; removal only under an exclusive one), A removed it when
 * its call ended and B's running session then created `.codex/pwned` on the host. Judged by the host: it must not
 * exist; the placeholder goes once the last holder of either CODEX_HOME is done (A retries on its own, at its next
 * call, or the next start of a SIGKILLed A's CODEX_HOME removes it).
 */
import { afterAll, describe, expect, test } from "bun:test";
import {
  closeSync,
  constants,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import type { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { flock, LOCK } from "../../ffi/libc.ts";
import { homeDir } from "../helpers/binary.ts";
import { codexProfileMeta, startServe, type Session } from "../helpers/mcp.ts";
import { CONF_BASE } from "../helpers/test-dirs.ts";
import { shellsMissing } from "../helpers/shells.ts";
import { skipWithout } from "../helpers/prereq.ts";
import { waitFor } from "../helpers/attack.ts";

const skip = skipWithout(
  "shared mount points suite",
  shellsMissing() ?? (Bun.which("bwrap") === null ? "bubblewrap not installed" : undefined),
);

const base = mkdtempSync(join(CONF_BASE, "shared-mounts-"));
const codexHome = homeDir();
const otherHome = homeDir();
const tmp = join(base, "tmp");
const proj = join(base, "proj");
const sessions: Session[] = [];

afterAll(async () => {
  for (const s of sessions) await s.close().catch(() => {});
  rmSync(base, { recursive: true, force: true });
  rmSync(codexHome, { recursive: true, force: true });
  rmSync(otherHome, { recursive: true, force: true });
});

/** The `_meta` of a call whose profile writes `proj` and keeps its missing `.codex` read-only (Codex 0.169's shape). */
const meta = () =>
  codexProfileMeta(proj, [
    { path: proj, access: "write" },
    { path: join(proj, ".codex"), access: "read" },
  ]);

/** Start a call in `proj` on `s` running `command`; its text once it ends. */
function call(s: Session, command: string): Promise<string> {
  return s.client
    .callTool({ name: "shell", arguments: { command, workdir: proj, login: false }, _meta: meta() }, undefined, { timeout: 90_000 })
    .then(
      (r) => JSON.stringify(r),
      (e) => `the call failed: ${(e as Error).message}; the server said: ${s.stderr()}`,
    );
}

/** Start an `exec_command` session in `proj` on `s` running `cmd` (the server's sandbox state: workspace-write of `proj`). */
async function session(s: Session, cmd: string): Promise<string> {
  const raw = (await s.client.callTool({ name: "exec_command", arguments: { cmd, workdir: proj, yield_time_ms: 300 } }, undefined, {
    timeout: 90_000,
  })) as { content: { text: string }[] };
  return raw.content.map((c) => c.text).join("\n");
}

/**
 * Whether no process holds a `flock` on folder `p` (the test takes and drops an exclusive one; true when `p` is gone):
 * every sandbox standing on it has been given back.
 */
function unheld(p: string): boolean {
  let fd: number;
  try {
    fd = openSync(p, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
  } catch {
    return true;
  }
  try {
    flock(fd, LOCK.EX | LOCK.NB);
    return true;
  } catch {
    return false;
  } finally {
    closeSync(fd);
  }
}

/** The pids holding a `flock` on folder `p` now (/proc/locks, by inode). */
function lockHolders(p: string): number[] {
  const ino = String(statSync(p).ino);
  return readFileSync("/proc/locks", "utf8")
    .split("\n")
    .map((l) => l.trim().split(/\s+/))
    .filter((f) => f[1] === "FLOCK" && f[5]?.split(":")[2] === ino)
    .map((f) => Number(f[4]));
}

/** The marker files of `home`'s `sandbox-mounts` (none once nothing is held). */
const markerFiles = (home: string) => readdirSync(join(home, "sandbox-mounts")).filter((n) => n.endsWith(".json"));

/**
 * B (CODEX_HOME `otherHome`, workspace-write of `proj`) starts a session standing on `proj/.codex` that says it runs
 * (`ready-b`), waits for `go-b`, then tries `mkdir -p .codex/pwned` and says it is done (`done-b`).
 */
async function standingSession(b: Session, goB: string): Promise<void> {
  expect(await b.sandboxState({ type: "workspace-write", network_access: false }, proj)).toEqual({});
  const text = await session(b, `touch ready-b; until [ -e ${goB} ]; do sleep 0.02; done; mkdir -p .codex/pwned; touch done-b`);
  expect(text).toContain("session ID");
  expect(await waitFor(() => existsSync(join(proj, "ready-b")), 20_000)).toBe(true);
}

describe.skipIf(skip)("a mount point two servers share", () => {
  test("stays while the other server's sandbox stands on it; the last holder removes it", async () => {
    for (const p of [proj, tmp]) mkdirSync(p, { recursive: true });
    const go = (n: string) => join(base, `go-${n}`);
    const a = await startServe({ codexHome, env: { TMPDIR: tmp } });
    const b = await startServe({ codexHome, env: { TMPDIR: tmp } });
    sessions.push(a, b);
    for (let round = 0; round < 3; round++) {
      for (const n of ["a", "b"]) rmSync(go(n), { force: true });
      rmSync(join(proj, "ready-b"), { force: true });
      // A makes the mount point and waits.
      const first = call(a, `until [ -e ${go("a")} ]; do sleep 0.02; done; echo A-done`);
      expect(await waitFor(() => existsSync(join(proj, ".codex")), 20_000)).toBe(true);
      // B's sandbox stands on the same folder, says it runs, and waits.
      const second = call(b, `touch ready-b; until [ -e ${go("b")} ]; do sleep 0.02; done; mkdir -p .codex/pwned 2>&1; echo B-done`);
      expect(await waitFor(() => existsSync(join(proj, "ready-b")), 20_000)).toBe(true);
      // A's call ends: it gives the mount point back.
      writeFileSync(go("a"), "");
      expect(await first).toContain("A-done");
      // B still runs on it: the folder stays, and B cannot create anything in it.
      expect(existsSync(join(proj, ".codex"))).toBe(true);
      writeFileSync(go("b"), "");
      const out = await second;
      expect(out).toContain("B-done");
      expect(existsSync(join(proj, ".codex", "pwned"))).toBe(false);
      // The last holder removed it; no marker names it any more.
      expect(existsSync(join(proj, ".codex"))).toBe(false);
      const markers = readdirSync(join(codexHome, "sandbox-mounts")).filter((n) => n.endsWith(".json"));
      expect(markers).toEqual([]);
      rmSync(join(proj, ".codex"), { recursive: true, force: true });
    }
  }, 180_000);

  test("servers with different CODEX_HOMEs: the first one's end does not pull the folder from under the other's session", async () => {
    for (const p of [proj, tmp]) mkdirSync(p, { recursive: true });
    for (const n of ["go-a", "go-b"]) rmSync(join(base, n), { force: true });
    for (const n of ["ready-b", "done-b"]) rmSync(join(proj, n), { force: true });
    const a = await startServe({ codexHome, env: { TMPDIR: tmp } });
    const b = await startServe({ codexHome: otherHome, env: { TMPDIR: tmp } });
    sessions.push(a, b);
    // A makes the mount point and waits.
    const first = call(a, `until [ -e ${join(base, "go-a")} ]; do sleep 0.02; done; echo A-done`);
    expect(await waitFor(() => existsSync(join(proj, ".codex")), 20_000)).toBe(true);
    // B's session stands on the folder no marker of its own CODEX_HOME names.
    await standingSession(b, join(base, "go-b"));
    // A's call ends: A gives the mount point back while B's sandbox still stands on it.
    writeFileSync(join(base, "go-a"), "");
    expect(await first).toContain("A-done");
    expect(existsSync(join(proj, ".codex"))).toBe(true);
    // B's session tries to create the protected folder's content: the host must not get it.
    writeFileSync(join(base, "go-b"), "");
    expect(await waitFor(() => existsSync(join(proj, "done-b")), 20_000)).toBe(true);
    expect(existsSync(join(proj, ".codex", "pwned"))).toBe(false);
    // Once B's sandbox is given back, A (idle) removes the placeholder it left pending.
    expect(await waitFor(() => !existsSync(join(proj, ".codex")), 30_000)).toBe(true);
    expect(markerFiles(codexHome)).toEqual([]);
    expect(markerFiles(otherHome)).toEqual([]);
    rmSync(join(proj, ".codex"), { recursive: true, force: true });
  }, 180_000);

  test("servers with different CODEX_HOMEs: when the maker ends last, its call's end removes the placeholder", async () => {
    for (const n of ["go-a", "go-b"]) rmSync(join(base, n), { force: true });
    for (const n of ["ready-b", "done-b"]) rmSync(join(proj, n), { force: true });
    const a = await startServe({ codexHome, env: { TMPDIR: tmp } });
    const b = await startServe({ codexHome: otherHome, env: { TMPDIR: tmp } });
    sessions.push(a, b);
    const first = call(a, `until [ -e ${join(base, "go-a")} ]; do sleep 0.02; done; echo A-done`);
    expect(await waitFor(() => existsSync(join(proj, ".codex")), 20_000)).toBe(true);
    await standingSession(b, join(base, "go-b"));
    writeFileSync(join(base, "go-b"), "");
    expect(await waitFor(() => existsSync(join(proj, "done-b")), 20_000)).toBe(true);
    expect(existsSync(join(proj, ".codex", "pwned"))).toBe(false);
    // B's sandbox is given back: only A's server still holds the folder.
    const aPid = (a.client.transport as StdioClientTransport).pid!;
    expect(await waitFor(() => lockHolders(join(proj, ".codex")).every((pid) => pid === aPid), 20_000)).toBe(true);
    writeFileSync(join(base, "go-a"), "");
    expect(await first).toContain("A-done");
    expect(existsSync(join(proj, ".codex"))).toBe(false);
    expect(markerFiles(codexHome)).toEqual([]);
    expect(markerFiles(otherHome)).toEqual([]);
  }, 180_000);

  test("a SIGKILLed maker's placeholder: the next start leaves it while another CODEX_HOME's session stands on it, then it goes", async () => {
    for (const n of ["go-a", "go-b"]) rmSync(join(base, n), { force: true });
    for (const n of ["ready-b", "done-b"]) rmSync(join(proj, n), { force: true });
    const a = await startServe({ codexHome, env: { TMPDIR: tmp } });
    const b = await startServe({ codexHome: otherHome, env: { TMPDIR: tmp } });
    sessions.push(a, b);
    void call(a, `until [ -e ${join(base, "go-a")} ]; do sleep 0.02; done`);
    expect(await waitFor(() => existsSync(join(proj, ".codex")), 20_000)).toBe(true);
    await standingSession(b, join(base, "go-b"));
    // A dies without giving anything back; a new server of A's CODEX_HOME sweeps at start.
    process.kill((a.client.transport as StdioClientTransport).pid!, "SIGKILL");
    const a2 = await startServe({ codexHome, env: { TMPDIR: tmp } });
    sessions.push(a2);
    expect(await call(a2, "echo up")).toContain("up"); // started (and swept) for sure
    expect(existsSync(join(proj, ".codex"))).toBe(true);
    writeFileSync(join(base, "go-b"), "");
    expect(await waitFor(() => existsSync(join(proj, "done-b")), 20_000)).toBe(true);
    expect(existsSync(join(proj, ".codex", "pwned"))).toBe(false);
    // B is done: the sweeping server's next call gives the placeholder back.
    expect(await waitFor(() => unheld(join(proj, ".codex")), 20_000)).toBe(true);
    expect(await call(a2, "echo again")).toContain("again");
    expect(existsSync(join(proj, ".codex"))).toBe(false);
    expect(markerFiles(codexHome)).toEqual([]);
    expect(markerFiles(otherHome)).toEqual([]);
    rmSync(join(proj, ".codex"), { recursive: true, force: true });
  }, 180_000);

  test("no sandboxed command can open the mount-point lock, on either backend (it could stall every server)", async () => {
    const lock = join(codexHome, "sandbox-mounts", "lock");
    expect(existsSync(lock)).toBe(true); // made by the servers above
    for (const backend of ["bwrap", "landlock"]) {
      const s = await startServe({ codexHome, env: { TMPDIR: tmp }, args: ["--sandbox-backend", backend] });
      sessions.push(s);
      const r = await s.shell({
        command: `(exec 9<'${lock}') 2>/dev/null && echo OPENED-R; (exec 8>>'${lock}') 2>/dev/null && echo OPENED-W; echo END`,
        workdir: proj,
        login: false,
      });
      expect(r.out.output).toContain("END");
      expect(r.out.output).not.toContain("OPENED");
    }
  }, 60_000);
});
