/**
 * A server running as root, bubblewrap, and another user's repository inside that user's private folder under a
 * writable root (a `mktemp -d` under /tmp, mode 0700, as any user's test run makes): the nested-repository search
 * (root sees everything) finds its `.git`, but the sandbox — uid 0 of bubblewrap's own user namespace, with no
 * capability over another user's files — cannot reach it, and neither can bubblewrap's bind of it. Seen on this
 * machine while an unprivileged user's test suite ran: every workspace-write call of a root `serve` whose writable
 * roots held /tmp failed with "bwrap: Can't find source path /tmp/nr.XXXX/t: Permission denied" (this test, before
 * src/sandbox/linux/sandbox-reach.ts: the call's exit code 1 and that message). Now the private folder itself is
 * bound read-only (bubblewrap needs search permission on its parent only), the call runs, and the sandbox can neither
 * write the repository nor move the folder aside. (A first version left the `.git` out of the mounts instead; an attack
 * review moved the folder aside and planted a look-alike with hooks at its path, and on a FUSE filesystem without
 * `default_permissions`, where the mode bits do not decide, wrote the hook itself.)
 *
 * Root only (it needs a folder owned by another user); a visible skip otherwise.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
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

/** A root `serve` on bubblewrap whose workspace-write calls run in `ws`, with `extra` writable roots. */
async function serveIn(ws: string, extra: string[] = []): Promise<Session> {
  const s = await startServe({
    command: [ensureBinary()],
    codexHome: mkdtempSync(join(base, "home-")),
    args: ["--sandbox-backend", "bwrap"],
  });
  sessions.push(s);
  await s.sandboxState({ type: "workspace-write", writable_roots: extra, network_access: false, exclude_slash_tmp: true }, ws);
  return s;
}

/**
 * In `ws`: list folder `dir`, then try to create the `pre-commit` hook of `repo`; the output says whether the listing
 * worked and the write met a read-only mount. Expects both (the sandbox gets in, and cannot write), and no hook on
 * the host at `hostRepo` (the same repository seen from outside).
 */
async function expectListedNotWritten(s: Session, ws: string, dir: string, repo: string, hostRepo: string): Promise<void> {
  const hook = join(repo, ".git", "hooks", "pre-commit");
  const r = await s.shell({
    command: `ls '${dir}' >/dev/null && echo listed; touch '${hook}' 2>&1 | grep -o 'Read-only file system'; echo done`,
    workdir: ws,
    login: false,
  });
  expect(r.out.output).toBe("listed\nRead-only file system\ndone\n");
  expect(existsSync(join(hostRepo, ".git", "hooks", "pre-commit"))).toBe(false);
}

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

/**
 * A passthrough FUSE filesystem (Debian's python3-fusepy) mounted without `default_permissions`: the daemon, running
 * as root, decides every access itself (as sshfs with `allow_other` run by root does, or NFS with `no_root_squash`),
 * so the sandbox's uid 0 gets into another user's 0700 folder whatever its mode bits say.
 */
const LOOPFS = `
import os, sys
from fusepy import FUSE, FuseOSError, Operations
class Loop(Operations):
    def __init__(s, root): s.root = root
    def _p(s, p): return s.root + p
    def access(s, p, mode):
        if not os.access(s._p(p), mode): raise FuseOSError(13)
    def getattr(s, p, fh=None):
        st = os.lstat(s._p(p))
        return {k: getattr(st, k) for k in ("st_atime", "st_ctime", "st_gid", "st_mode", "st_mtime", "st_nlink", "st_size", "st_uid")}
    def readdir(s, p, fh): return [".", ".."] + os.listdir(s._p(p))
    def readlink(s, p): return os.readlink(s._p(p))
    def mkdir(s, p, m): return os.mkdir(s._p(p), m)
    def rmdir(s, p): return os.rmdir(s._p(p))
    def unlink(s, p): return os.unlink(s._p(p))
    def rename(s, a, b): return os.rename(s._p(a), s._p(b))
    def chmod(s, p, m): return os.chmod(s._p(p), m)
    def chown(s, p, u, g): return os.lchown(s._p(p), u, g)
    def truncate(s, p, n, fh=None): os.truncate(s._p(p), n)
    def utimens(s, p, times=None): os.utime(s._p(p), times)
    def open(s, p, flags): return os.open(s._p(p), flags)
    def create(s, p, mode, fi=None): return os.open(s._p(p), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    def read(s, p, n, off, fh): os.lseek(fh, off, 0); return os.read(fh, n)
    def write(s, p, d, off, fh): os.lseek(fh, off, 0); return os.write(fh, d)
    def release(s, p, fh): return os.close(fh)
    def flush(s, p, fh): return 0
FUSE(Loop(sys.argv[1]), sys.argv[2], foreground=True, allow_other=True)
`;

/** Why the FUSE case cannot run here, or undefined. */
function fuseMissing(): string | undefined {
  if (process.getuid?.() !== 0) return "needs root";
  if (!existsSync("/dev/fuse")) return "no /dev/fuse";
  const r = Bun.spawnSync(["/usr/bin/python3", "-c", "import fusepy"], { stdout: "ignore", stderr: "ignore" });
  return r.exitCode === 0 ? undefined : "python3-fusepy is not installed (scripts/apt.sh)";
}

describe.skipIf(skip)("another user's repository in a private folder under a writable root", () => {
  test.skipIf(skipWithout("the FUSE case of another user's private repository", fuseMissing()))(
    "bubblewrap as root, on FUSE without default_permissions (the mode bits do not decide): the repository stays read-only",
    async () => {
      const src = mkdtempSync(join(base, "fuse-src-"));
      const mnt = mkdtempSync(join(base, "fuse-mnt-"));
      mkdirSync(join(src, "ws"));
      const repo = foreignRepo(join(src, "ws", "nr.private"));
      writeFileSync(join(base, "loopfs.py"), LOOPFS);
      const fuse = Bun.spawn(["/usr/bin/python3", join(base, "loopfs.py"), src, mnt], { stdout: "ignore", stderr: "pipe" });
      try {
        for (let i = 0; i < 200 && !existsSync(join(mnt, "ws")); i++) await Bun.sleep(25);
        expect(existsSync(join(mnt, "ws"))).toBe(true);
        const ws = join(mnt, "ws");
        // The daemon lets the sandbox in (without the read-only bind of the folder, the hook was written: the attack
        // review's reproduction), and the bind keeps it from writing.
        await expectListedNotWritten(await serveIn(ws), ws, join(ws, "nr.private"), join(ws, "nr.private", "t", "repo"), repo);
      } finally {
        Bun.spawnSync(["umount", "-l", mnt]);
        fuse.kill();
        await fuse.exited;
      }
    },
    60_000,
  );

  test("bubblewrap as root: a private folder whose ACL lets root in keeps its repository's .git read-only", async () => {
    const ws = mkdtempSync(join(base, "ws-"));
    const top = join(ws, "nr.acl");
    mkdirSync(top);
    const repo = foreignRepo(top);
    grantRootByAcl(top);
    // The ACL lets the sandbox in: without the read-only bind it could plant the hook.
    await expectListedNotWritten(await serveIn(ws), ws, top, repo, repo);
  }, 60_000);

  for (const depth of ["in the workspace", "in an extra writable root"] as const)
    test(`bubblewrap as root: the call runs and cannot reach it (${depth})`, async () => {
      const ws = mkdtempSync(join(base, "ws-"));
      const extra = mkdtempSync(join(base, "extra-"));
      const top = join(depth === "in the workspace" ? ws : extra, "nr.private");
      mkdirSync(top);
      const repo = foreignRepo(top);
      const s = await serveIn(ws, [extra]);
      const r = await s.shell({
        command:
          `touch ran; touch '${repo}/.git/hooks/pre-commit' 2>/dev/null && echo reached; ls '${top}' >/dev/null 2>&1 && echo listed; ` +
          `mv '${top}' '${top}.moved' 2>/dev/null && echo moved; echo done`,
        workdir: ws,
        login: false,
      });
      expect(r.out.output).toBe("done\n");
      expect(r.out.exit_code).toBe(0);
      expect(existsSync(join(ws, "ran"))).toBe(true);
      expect(existsSync(join(repo, ".git", "hooks", "pre-commit"))).toBe(false);
      // The private folder is bound read-only onto itself, so it cannot be moved aside for a look-alike with hooks
      // at the same path (an attack review found this when the .git was only left out of the mounts).
      expect(existsSync(join(top, "t", "repo", ".git"))).toBe(true);
      expect(existsSync(`${top}.moved`)).toBe(false);
      // Still under bubblewrap: no fallback to Landlock, no preflight forgotten.
      expect(s.stderr()).not.toContain("preflight");
      expect(s.stderr()).not.toContain("Landlock");
    }, 60_000);
});
