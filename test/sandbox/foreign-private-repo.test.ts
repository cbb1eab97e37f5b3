/**
 * A server running as root, bubblewrap, and another user's repository inside that user's private folder under a
 * writable root (a `mktemp -d` under /tmp, mode 0700, as any user's test run makes): the nested-repository search
 * (root sees everything) finds its `.git`, but the sandbox — uid 0 of bubblewrap's own user namespace, with no
 * capability over another user's files — cannot reach it, and neither can bubblewrap's bind of it. Seen on this
 * machine while an unprivileged user's test suite ran: every workspace-write call of a root `serve` whose writable
 * roots held /tmp failed with "bwrap: Can't find source path /tmp/nr.XXXX/t: Permission denied" (this test, before
 * src/sandbox/linux/sandbox-reach.ts: the call's exit code 1 and that message). Now the unreachable `.git` is left
 * out of the mounts (nothing inside can get to it), the call runs, and the sandbox still cannot write the repository.
 *
 * Root only (it needs a folder owned by another user); a visible skip otherwise.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { join } from "node:path";
import { ensureBinary } from "../helpers/binary.ts";
import { startServe, type Session } from "../helpers/mcp.ts";
import { bwrapMissing } from "../helpers/sandbox-run.ts";
import { skipWithout } from "../helpers/prereq.ts";
import { CONF_BASE } from "../helpers/test-dirs.ts";

const NOBODY = 65534;
const skip =
  skipWithout("another user's private repository suite", bwrapMissing) ||
  skipWithout(
    "another user's private repository suite",
    process.getuid?.() === 0 ? undefined : "needs root (a folder owned by another user)",
  );
mkdirSync(CONF_BASE, { recursive: true });
const base = mkdtempSync(join(CONF_BASE, "foreign-private-repo-"));
const sessions: Session[] = [];
afterAll(async () => {
  for (const s of sessions) await s.close().catch(() => {});
  rmSync(base, { recursive: true, force: true });
});

/** `git init` of `dir`, then the whole tree handed to `nobody`, its top folder mode 0700. */
function foreignRepo(top: string): string {
  const repo = join(top, "t", "repo");
  mkdirSync(repo, { recursive: true });
  const r = Bun.spawnSync(["git", "init", "-q", repo], { stdout: "ignore", stderr: "pipe" });
  if (r.exitCode !== 0) throw new Error(`git init: ${r.stderr}`);
  Bun.spawnSync(["chown", "-R", `${NOBODY}:${NOBODY}`, top]);
  chmodSync(top, 0o700);
  return repo;
}

/**
 * A POSIX access ACL on every folder from `top` down (python3's `os.setxattr`, no `setfacl` needed) granting uid 0
 * rwx: the owner keeps rwx, its group and others nothing (mask rwx). The ACL's binary form (linux/posix_acl_xattr.h):
 * version 2, then (tag u16, perm u16, id u32) entries in tag order.
 */
function grantRootByAcl(top: string): void {
  const script = `
import os, struct, sys
e = lambda tag, perm, id=0xFFFFFFFF: struct.pack("<HHI", tag, perm, id)
acl = struct.pack("<I", 2) + e(0x01, 7) + e(0x02, 7, 0) + e(0x04, 0) + e(0x10, 7) + e(0x20, 0)
for d, dirs, files in os.walk(sys.argv[1]):
    os.setxattr(d, "system.posix_acl_access", acl, follow_symlinks=False)
    for f in files: os.setxattr(os.path.join(d, f), "system.posix_acl_access", acl, follow_symlinks=False)
`;
  const r = Bun.spawnSync(["python3", "-c", script, top], { stdout: "ignore", stderr: "pipe" });
  if (r.exitCode !== 0) throw new Error(`setxattr: ${r.stderr}`);
}

describe.skipIf(skip)("another user's repository in a private folder under a writable root", () => {
  test("bubblewrap as root: a private folder whose ACL lets root in keeps its repository's .git read-only", async () => {
    const ws = mkdtempSync(join(base, "ws-"));
    const top = join(ws, "nr.acl");
    mkdirSync(top);
    const repo = foreignRepo(top);
    grantRootByAcl(top);
    const s = await startServe({
      command: [ensureBinary()],
      codexHome: mkdtempSync(join(base, "home-")),
      args: ["--sandbox-backend", "bwrap"],
    });
    sessions.push(s);
    await s.sandboxState({ type: "workspace-write", writable_roots: [], network_access: false, exclude_slash_tmp: true }, ws);
    // The ACL lets the sandbox in: without the read-only bind it could plant the hook.
    const r = await s.shell({
      command: `ls '${top}' >/dev/null && echo listed; touch '${repo}/.git/hooks/pre-commit' 2>&1 | grep -o 'Read-only file system'; echo done`,
      workdir: ws,
      login: false,
    });
    expect(r.out.output).toBe("listed\nRead-only file system\ndone\n");
    expect(existsSync(join(repo, ".git", "hooks", "pre-commit"))).toBe(false);
  }, 60_000);

  for (const depth of ["in the workspace", "in an extra writable root"] as const)
    test(`bubblewrap as root: the call runs and cannot reach it (${depth})`, async () => {
      const ws = mkdtempSync(join(base, "ws-"));
      const extra = mkdtempSync(join(base, "extra-"));
      const top = join(depth === "in the workspace" ? ws : extra, "nr.private");
      mkdirSync(top);
      const repo = foreignRepo(top);
      const s = await startServe({
        command: [ensureBinary()],
        codexHome: mkdtempSync(join(base, "home-")),
        args: ["--sandbox-backend", "bwrap"],
      });
      sessions.push(s);
      await s.sandboxState({ type: "workspace-write", writable_roots: [extra], network_access: false, exclude_slash_tmp: true }, ws);
      const r = await s.shell({
        command: `touch ran; touch '${repo}/.git/hooks/pre-commit' 2>/dev/null && echo reached; ls '${top}' >/dev/null 2>&1 && echo listed; echo done`,
        workdir: ws,
        login: false,
      });
      expect(r.out.output).toBe("done\n");
      expect(r.out.exit_code).toBe(0);
      expect(existsSync(join(ws, "ran"))).toBe(true);
      expect(existsSync(join(repo, ".git", "hooks", "pre-commit"))).toBe(false);
      // Still under bubblewrap: no fallback to Landlock, no preflight forgotten.
      expect(s.stderr()).not.toContain("preflight");
      expect(s.stderr()).not.toContain("Landlock");
    }, 60_000);
});
