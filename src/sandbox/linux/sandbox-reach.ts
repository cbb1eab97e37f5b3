/**
 * What a bubblewrap sandbox started by root cannot reach (./bwrap-mounts.ts): a server running as root sees every
 * folder (CAP_DAC_OVERRIDE in the first user namespace), but its bubblewrap sandbox runs as uid 0 of a user
 * namespace of its own, where only uid 0 and gid 0 are mapped. There the kernel grants the capability over a file
 * only when both its owner and its group are mapped (`capable_wrt_inode_uidgid`); another user's folder is searched
 * by the permission bits alone. So a repository inside another user's private folder (`mktemp -d` under /tmp: mode
 * 0700) is out of bubblewrap's reach: binding its `.git` read-only fails with "Can't find source path …: Permission
 * denied", `--ro-bind-try` included (it skips a missing source only), and the whole call failed.
 *
 * Such a folder is bound read-only itself instead (bubblewrap needs search permission on its parent only, which the
 * sandbox has): whatever lies inside it is then read-only whether or not the sandbox could get in, and the folder
 * cannot be renamed (a mount point), so no look-alike can be made at the protected path. So the test here need not
 * be exact: judging a folder closed when it is not (a FUSE filesystem without `default_permissions`, NFS with
 * `no_root_squash`, CIFS `noperm`, where the server or daemon decides instead of the mode bits) makes more read-only,
 * never less. A folder on the way counts as closed when its owner is not root, its mode grants the sandbox no search
 * (group bits when the server is in its group, else other bits), and it carries no POSIX access ACL (one that could let
 * uid 0 or a group of ours in: then it counts as open, and its `.git` is bound as any other). Nothing in the sandbox
 * can change such a folder's owner, mode or ACL (it does not own it, and has no capability over it). Only a server
 * running as root needs this: an unprivileged server's sandbox has its credentials, so it reaches whatever the
 * server found.
 */
import { lstatSync } from "node:fs";
import { dirname, sep } from "node:path";
import { ERRNO, syscall, syscallNumber } from "../../../ffi/libc.ts";
import { isErrorCode } from "../../errors.ts";

/** ENODATA (Linux): the attribute is not set. */
const ENODATA = 61;

/**
 * The outermost folder strictly between `root` (a writable root `path` lies under; bound, so open itself) and `path`
 * (absolute, canonical) that shuts a bubblewrap sandbox started by this process out (see the file's header), or
 * undefined: always when this process does not run as root; for a path not under `root`; when a folder on the way
 * cannot be read or is not a folder (gone: `path`'s own bind is `-try`, or fails closed).
 */
export function closedFolderOnTheWay(path: string, root: string): string | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const prefix = root.endsWith(sep) ? root : root + sep;
  if (!path.startsWith(prefix)) return undefined;
  const chain: string[] = [];
  for (let d = dirname(path); d !== root && d.startsWith(prefix); d = dirname(d)) chain.push(d);
  const groups = new Set([process.getegid?.() ?? 0, ...(process.getgroups?.() ?? [])]);
  for (const d of chain.reverse()) {
    let st;
    try {
      st = lstatSync(d);
    } catch {
      return undefined;
    }
    if (!st.isDirectory()) return undefined;
    // Root's own folders: the capability applies (or the owner's bits do); counted as open.
    if (st.uid === 0) continue;
    const search = groups.has(st.gid) ? 0o010 : 0o001;
    if ((st.mode & search) === 0 && !mayCarryAcl(d)) return d;
  }
  return undefined;
}

/**
 * Whether folder `d` may carry a POSIX access ACL: false when `lgetxattr` says it has none, or that the filesystem
 * keeps none (EOPNOTSUPP: FUSE, NFSv4; there the mode bits may not decide either, which the read-only bind of the
 * folder covers).
 */
function mayCarryAcl(d: string): boolean {
  const name = Buffer.from("system.posix_acl_access\0");
  try {
    syscall("lgetxattr", syscallNumber("lgetxattr"), Buffer.from(`${d}\0`), name, null, 0);
    return true;
  } catch (e) {
    if (!isErrorCode(e, "SYSCALL")) return true;
    const errno = e.data.errno;
    return !(errno === ENODATA || errno === ERRNO.EOPNOTSUPP);
  }
}
