/**
 * Issue 39, item 3 ("removed only when no live holder remains"): two servers sharing a workspace (and CODEX_HOME)
 * need the same empty mount point for the project's missing `.codex`. Server A makes it; server B finds it there.
 * Before the fix, B took it for a real folder and A removed it when A's call ended — while B's sandbox still stood on
 * it: the kernel detached B's read-only bind, and B's command could then create `.codex` (Codex's protected config
 * folder) in the project. Through the compiled binary and real MCP clients, judged by the host's folders: after A's
 * call ends, B's command runs `mkdir -p .codex/pwned`; the host must not get `.codex/pwned`, the placeholder stays
 * while B runs, and the last holder (B) removes it.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { homeDir } from "../helpers/binary.ts";
import { startServe, type Session } from "../helpers/mcp.ts";
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
const tmp = join(base, "tmp");
const proj = join(base, "proj");
const sessions: Session[] = [];

afterAll(async () => {
  for (const s of sessions) await s.close().catch(() => {});
  rmSync(base, { recursive: true, force: true });
  rmSync(codexHome, { recursive: true, force: true });
});

/** The `_meta` of a call whose profile writes `proj` and keeps its missing `.codex` read-only (Codex 0.169's shape). */
function meta(): Record<string, unknown> {
  const profile = {
    type: "managed",
    file_system: {
      type: "restricted",
      entries: [
        { path: { type: "special", value: { kind: "root" } }, access: "read" },
        { path: { type: "path", path: proj }, access: "write" },
        { path: { type: "path", path: join(proj, ".codex") }, access: "read" },
      ],
    },
    network: "restricted",
  };
  const state = { permissionProfile: profile, sandboxCwd: `file://${proj}`, useLegacyLandlock: false, useMxc: false };
  return { "codex/sandbox-state": state, "codex/sandbox-state-meta": state };
}

/** Start a call in `proj` on `s` running `command`; its text once it ends. */
function call(s: Session, command: string): Promise<string> {
  return s.client
    .callTool({ name: "shell", arguments: { command, workdir: proj, login: false }, _meta: meta() }, undefined, { timeout: 90_000 })
    .then(
      (r) => JSON.stringify(r),
      (e) => `the call failed: ${(e as Error).message}; the server said: ${s.stderr()}`,
    );
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
