/**
 * What a bubblewrap sandbox started by root cannot reach (./bwrap-mounts.ts): a server running as root sees every
 * folder (CAP_DAC_OVERRIDE in the first user namespace), but its bubblewrap sandbox runs as uid 0 of a user
 * namespace of its own, where only uid 0 and gid 0 are mapped. There the kernel grants the capability over a file
 * only when both its owner and its group are mapped (`capable_wrt_inode_uidgid`); another user's folder is searched
 * by the permission bits alone. So a repository inside another user's private folder (`mktemp -d` under /tmp: mode
 * 0700) is out of the sandbox's reach — and out of bubblewrap's: binding its `.git` read-only fails with "Can't find
 * source path …: Permission denied", `--ro-bind-try` included (it skips a missing source only), and the whole call
 * failed. Such a path needs no bind: nothing in the sandbox can get to it.
 *
 * The test errs towards "reachable" (a bind kept where it was not needed fails the call closed; a bind left out where
 * it was needed would leave a `.git` writable): a folder on the way counts as closed only when its owner is not
 * root, its mode grants no search to the sandbox (group bits when the server is in its group, else other bits), and
 * it carries no POSIX ACL (`system.posix_acl_access`, which could grant uid 0 or a group of ours more). Nothing in the
 * sandbox can open such a folder: it can change neither its mode nor its ACL (it does not own it, and has no
 * capability over it). Only a server running as root needs this: an unprivileged server's sandbox has its
 * credentials, so it reaches whatever the server found.
 */
import { lstatSync } from "node:fs";
import { dirname, sep } from "node:path";
import { ERRNO, syscall, syscallNumber } from "../../../ffi/libc.ts";
import { isErrorCode } from "../../errors.ts";

/** ENODATA (Linux): the attribute is not set. */
const ENODATA = 61;

/**
 * Whether a bubblewrap sandbox started by this process could not search its way to `path` (absolute, canonical)
 * from `root`, a writable root it lies under (bound, so reachable itself): true only when this process runs as
 * root and some folder strictly between `root` and `path` shuts the sandbox out (see the file's header). False for
 * a path not under `root`, a folder that cannot be read (gone: its bind is `-try` or fails closed), or any doubt.
 */
export function outOfSandboxReach(path: string, root: string): boolean {
  if (process.getuid?.() !== 0) return false;
  const prefix = root.endsWith(sep) ? root : root + sep;
  if (!path.startsWith(prefix)) return false;
  const chain: string[] = [];
  for (let d = dirname(path); d !== root && d.startsWith(prefix); d = dirname(d)) chain.push(d);
  const groups = new Set([process.getegid?.() ?? 0, ...(process.getgroups?.() ?? [])]);
  for (const d of chain.reverse()) {
    let st;
    try {
      st = lstatSync(d);
    } catch {
      return false;
    }
    if (!st.isDirectory()) return false;
    // Root's own folders: the capability applies (or the owner's bits do); counted as open.
    if (st.uid === 0) continue;
    const search = groups.has(st.gid) ? 0o010 : 0o001;
    if ((st.mode & search) === 0 && !mayCarryAcl(d)) return true;
  }
  return false;
}

/** Whether folder `d` may carry a POSIX access ACL: false only when `lgetxattr` says it has none. */
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
