/**
 * Where the local approver's sockets live (docs/approvals.md, "The channel"): one folder per user, one socket per
 * `serve` (`<pid>.sock`), found the same way by the server and by `shellmcp approvals`:
 *
 * 1. `$XDG_RUNTIME_DIR/shellmcp` when `XDG_RUNTIME_DIR` is set, absolute, a real folder of this user that nobody else
 *    can write, and not inside a temporary folder every workspace-write sandbox may write (`/tmp`, `$TMPDIR`,
 *    `/dev/shm`);
 * 2. else `$CODEX_HOME/approvals`: CODEX_HOME is never writable by any call (bubblewrap re-binds it read-only, a
 *    Landlock call whose writable roots contain it is refused, and `serve` refuses a CODEX_HOME a sandbox could
 *    have written).
 * `/tmp/shellmcp-<uid>` is not used: every workspace-write sandbox can write `/tmp`, so a command could plant a
 * socket there that shows a person false questions, or remove the real one.
 *
 * The folder is made `0700` (never through a symbolic link) and checked before every use: a real folder, owned by
 * this user, mode `0700`; anything else is refused with the reason.
 */
import { chmodSync, existsSync, lstatSync, mkdirSync } from "node:fs";
import { dirname, isAbsolute, join, resolve, sep } from "node:path";
import { ShellmcpError } from "../errors.ts";
import { resolveCodexHome } from "../execpolicy/discovery.ts";

/** Longest `sun_path` of a pathname socket on Linux, terminating NUL excluded. */
export const MAX_SOCKET_PATH = 107;

/** Folders every workspace-write sandbox may write, where the approver's folder must not lie. */
function sharedTemporaryFolders(env: Record<string, string | undefined>): string[] {
  return ["/tmp", "/dev/shm", ...(env.TMPDIR !== undefined && isAbsolute(env.TMPDIR) ? [resolve(env.TMPDIR)] : [])];
}

function inside(path: string, root: string): boolean {
  const r = root.endsWith(sep) ? root : root + sep;
  return path === root || path.startsWith(r);
}

/**
 * The approver's folder for `env` (see the module comment), not created. Throws `CONFIG` when CODEX_HOME is named
 * but missing (as every command that reads it).
 */
export function approvalsDir(env: Record<string, string | undefined> = process.env): string {
  return runtimeDir(env) ?? join(resolveCodexHome(env), "approvals");
}

/** `$XDG_RUNTIME_DIR/shellmcp` when `XDG_RUNTIME_DIR` qualifies (see the module comment), else undefined. */
function runtimeDir(env: Record<string, string | undefined>): string | undefined {
  const xdg = env.XDG_RUNTIME_DIR;
  if (xdg === undefined || !isAbsolute(xdg) || sharedTemporaryFolders(env).some((t) => inside(resolve(xdg), t))) return undefined;
  try {
    const st = lstatSync(xdg);
    if (st.isDirectory() && st.uid === process.getuid!() && (st.mode & 0o022) === 0) return join(resolve(xdg), "shellmcp");
  } catch {
    // not usable
  }
  return undefined;
}

/**
 * Every folder a server of this user may have chosen, for `shellmcp approvals`: MCP clients often start servers with
 * a reduced environment (the MCP SDK passes HOME, PATH, USER, SHELL, TERM, LOGNAME only), so a server may use
 * `$CODEX_HOME/approvals` while the person's terminal has `XDG_RUNTIME_DIR`. Both are looked in.
 */
export function approvalsDirs(env: Record<string, string | undefined> = process.env): string[] {
  const out: string[] = [];
  const rt = runtimeDir(env);
  if (rt !== undefined) out.push(rt);
  try {
    out.push(join(resolveCodexHome(env), "approvals"));
  } catch (e) {
    if (out.length === 0) throw e;
  }
  return out;
}

/**
 * Why `dir` must not be used as the approver's folder, or undefined when it is a real folder (not a link) owned by
 * this user with mode `0700`.
 */
export function dirProblem(dir: string): string | undefined {
  let st;
  try {
    st = lstatSync(dir);
  } catch (e) {
    return `${dir} cannot be examined: ${(e as Error).message}`;
  }
  if (st.isSymbolicLink()) return `${dir} is a symbolic link`;
  if (!st.isDirectory()) return `${dir} is not a folder`;
  if (st.uid !== process.getuid!()) return `${dir} belongs to uid ${st.uid}, not to this user (uid ${process.getuid!()})`;
  if ((st.mode & 0o777) !== 0o700) return `${dir} has mode ${(st.mode & 0o777).toString(8).padStart(4, "0")}, not 0700`;
  return undefined;
}

/**
 * Create `dir` (mode `0700`; a missing parent, e.g. a new user's `~/.codex`, made `0700` too) unless it exists, then check it ({@link dirProblem}). An
 * existing folder of this user with a looser mode is tightened to `0700` first. Throws `CONFIG` with the reason.
 */
export function ensureApprovalsDir(dir: string): void {
  // CODEX_HOME (~/.codex) may not exist yet for a new user: made private, as Codex makes it.
  if (!existsSync(dirname(dir))) mkdirSync(dirname(dir), { recursive: true, mode: 0o700 });
  try {
    mkdirSync(dir, { mode: 0o700 });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "EEXIST")
      throw new ShellmcpError("CONFIG", `cannot create the approver's folder ${dir}: ${(e as Error).message}`);
  }
  try {
    const st = lstatSync(dir);
    if (st.isDirectory() && !st.isSymbolicLink() && st.uid === process.getuid!() && (st.mode & 0o777) !== 0o700) chmodSync(dir, 0o700);
  } catch {
    // dirProblem says what is wrong
  }
  const why = dirProblem(dir);
  if (why !== undefined) throw new ShellmcpError("CONFIG", `the approver's folder is unsafe: ${why}`);
}

/** The socket of the `serve` with process id `pid` in `dir`. Throws `CONFIG` when the path is too long for a socket. */
export function socketPath(dir: string, pid: number): string {
  const p = join(dir, `${pid}.sock`);
  if (Buffer.byteLength(p) > MAX_SOCKET_PATH)
    throw new ShellmcpError(
      "CONFIG",
      `the approver's socket path ${p} is longer than ${MAX_SOCKET_PATH} bytes: set XDG_RUNTIME_DIR (e.g. /run/user/<uid>) or a shorter CODEX_HOME`,
    );
  return p;
}
