/**
 * The patched shells the compiled executable carries (issue 25): bash and zsh built statically against musl by
 * scripts/build-shells-static.sh and embedded by build.ts (Bun `with { type: "file" }` assets, see
 * `embedded-shells.ts`), so that `shellmcp` needs nothing beside it but the kernel.
 *
 * A program cannot be exec'd from inside the executable, so the shell the caller asks for is copied to a folder
 * that no sandboxed command can write and that is checked on every start:
 *
 * - root: `/run/shellmcp/`; another user: `/run/user/<uid>/shellmcp/` (systemd's per-user runtime folder, mode 0700,
 *   a tmpfs) when it exists and is that user's, else `$HOME/.cache/shellmcp/`. None of them lies in a default writable
 *   root of Codex's sandbox policies (the workspace, `/tmp`, `$TMPDIR`); a workspace that holds `~/.cache` would
 *   (or a HOME under `/tmp`), which is why the runtime folder comes first, and why the folder in use is protected
 *   like CODEX_HOME ({@link carriedBases}: read-only under bubblewrap, a refusal under Landlock).
 * - inside it, `shells-<first 16 hex digits of the shell's SHA-256>/<bash|zsh>`: one folder per content, so two
 *   versions of shellmcp running at once never rewrite each other's shell.
 * - on each start (each `serve`): the folders are checked (not a symlink, a directory owned by this user, writable by
 *   nobody else), the shell is opened with `O_NOFOLLOW` and checked (a regular file owned by this user, mode 0755, the
 *   embedded bytes' SHA-256). Anything else is replaced: a new file written with `O_EXCL` beside it, then renamed
 *   over it. A folder that fails its check is not used: the next candidate is tried, and when none qualifies `serve`
 *   stops with the reasons.
 *
 * Not a sealed memfd: exec of `/proc/self/fd/N` needs the fd and `/proc` inside bubblewrap's new mount namespace
 * and its own `/proc`, and Landlock would have to allow execution from it; a checked copy works under every backend.
 */
import {
  closeSync,
  constants,
  fchmodSync,
  fstatSync,
  lstatSync,
  mkdirSync,
  openSync,
  readFileSync,
  readlinkSync,
  readSync,
  renameSync,
  statSync,
  symlinkSync,
  unlinkSync,
  writeSync,
} from "node:fs";
import { dirname, join } from "node:path";
import { ShellmcpError } from "../errors.ts";
import { log } from "../log.ts";
import { IS_COMPILED, userHome } from "../self.ts";

/** The programs shellmcp carries: its patched shells, the room launcher (src/sandbox/linux/room-launcher.ts) and sandbox-exec (src/sandbox/linux/sandbox-exec.ts). */
export type PortableShellKind = "bash" | "zsh" | "room-launcher" | "sandbox-exec";

/** Prefix of the per-content folders under a base folder. */
const CONTENT_DIR_PREFIX = "shells-";

/** The per-content folder for programs whose SHA-256 (hex) is `digest`: `shells-<first 16 hex digits>`. */
function contentFolder(digest: string): string {
  return `${CONTENT_DIR_PREFIX}${digest.slice(0, 16)}`;
}

/** Mode of an extracted shell: readable and executable by all, writable by its owner only. */
const SHELL_MODE = 0o755;

/**
 * Base folders that may hold extracted shells, best first, for this user (see the top of this file). Pure: it
 * creates nothing. The Landlock helper makes the existing ones readable under restricted reads.
 */
export function portableShellBases(uid: number = process.getuid?.() ?? -1, home: string = userHome()): string[] {
  if (uid === 0) return ["/run/shellmcp", join(home, ".cache", "shellmcp")];
  return [join("/run/user", String(uid), "shellmcp"), join(home, ".cache", "shellmcp")];
}

/**
 * The base folder that holds what this executable carries and runs outside every sandbox — the lifeline guard (which
 * starts every call, bubblewrap included), sandbox-exec, the role links — besides its shells: the first of
 * {@link portableShellBases} that qualifies, made when missing (as {@link installPortableShell} would), in a list;
 * empty for a from-source run (it carries nothing) or when none qualifies. Whoever can write there runs code outside
 * the sandbox at the next call, and `~/.cache/shellmcp` lies inside a call's writable root whenever the workspace
 * holds HOME: `serve` and the exec-server protect it as they protect CODEX_HOME (src/sandbox/protected-config.ts:
 * read-only inside every writable root under bubblewrap, a refusal under Landlock). Never throws.
 */
export function carriedBases(uid: number = process.getuid?.() ?? -1, home: string = userHome()): string[] {
  if (!IS_COMPILED) return [];
  const first = portableShellBases(uid, home).find((b) => ensureBase(b, uid) === undefined);
  return first === undefined ? [] : [first];
}

/** Whether `dir` is one of {@link portableShellBases} (of this user and HOME): where carried programs live. */
export function isCarriedBase(dir: string): boolean {
  return portableShellBases().includes(dir);
}

/** Why `path` cannot hold our shells (not ours, a symlink, writable by others), or undefined when it can. */
function folderProblem(path: string, uid: number): string | undefined {
  let st;
  try {
    st = lstatSync(path);
  } catch (e) {
    return `${path}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`;
  }
  if (st.isSymbolicLink()) return `${path} is a symbolic link`;
  if (!st.isDirectory()) return `${path} is not a folder`;
  if (st.uid !== uid) return `${path} belongs to uid ${st.uid}, not ${uid}`;
  if ((st.mode & 0o022) !== 0) return `${path} is writable by others (mode ${(st.mode & 0o777).toString(8)})`;
  return undefined;
}

/** `mkdir -m 0700` of `path` when missing (its parent must exist); then its check. */
function ensureFolder(path: string, uid: number): string | undefined {
  try {
    mkdirSync(path, { mode: 0o700 });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "EEXIST") return `${path}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`;
  }
  return folderProblem(path, uid);
}

/**
 * {@link ensureFolder} for a base folder, creating its missing parents (mode 0700: `~/.cache` on a new account)
 * except under `/run`, whose per-user folders belong to the system (a missing `/run/user/<uid>` means none).
 */
function ensureBase(base: string, uid: number): string | undefined {
  if (!base.startsWith("/run/")) {
    try {
      mkdirSync(dirname(base), { recursive: true, mode: 0o700 });
    } catch (e) {
      return `${dirname(base)}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`;
    }
  }
  return ensureFolder(base, uid);
}

/** SHA-256 of `bytes`, hex. */
function sha256(bytes: Uint8Array): string {
  return new Bun.CryptoHasher("sha256").update(bytes).digest("hex");
}

/** Whether `path` is a regular file of this user, mode 0755, with exactly `bytes` (opened with O_NOFOLLOW). */
function fileMatches(path: string, bytes: Uint8Array, digest: string, uid: number): boolean {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch {
    return false;
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile() || st.uid !== uid || (st.mode & 0o7777) !== SHELL_MODE || st.size !== bytes.length) return false;
    const have = new Uint8Array(bytes.length);
    let at = 0;
    while (at < have.length) {
      const n = readSync(fd, have, at, have.length - at, at);
      if (n <= 0) return false;
      at += n;
    }
    return sha256(have) === digest;
  } finally {
    closeSync(fd);
  }
}

/** Write `bytes` to `path` as a new file (O_EXCL beside it, then rename over it), mode 0755. */
function writeShell(path: string, bytes: Uint8Array): void {
  const tmp = `${path}.${process.pid}.${Date.now()}.new`;
  const fd = openSync(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o700);
  try {
    let at = 0;
    while (at < bytes.length) at += writeSync(fd, bytes, at, bytes.length - at);
    fchmodSync(fd, SHELL_MODE); // not left to the umask
  } finally {
    closeSync(fd);
  }
  try {
    renameSync(tmp, path);
  } catch (e) {
    try {
      unlinkSync(tmp);
    } catch {
      // already gone
    }
    throw e;
  }
}

/**
 * Path of a checked copy of the `kind` shell carried in `bytes` (see the top of this file), written when missing
 * or different. `bases` defaults to {@link portableShellBases}. Throws `CONFIG` naming every refused folder when
 * none can hold it.
 */
export function installPortableShell(kind: PortableShellKind, bytes: Uint8Array, bases: readonly string[] = portableShellBases()): string {
  const uid = process.getuid?.() ?? -1;
  const digest = sha256(bytes);
  const refused: string[] = [];
  for (const base of bases) {
    const problem = ensureBase(base, uid) ?? ensureFolder(join(base, contentFolder(digest)), uid);
    if (problem !== undefined) {
      refused.push(problem);
      continue;
    }
    const path = join(base, contentFolder(digest), kind);
    if (fileMatches(path, bytes, digest, uid)) return path;
    try {
      writeShell(path, bytes);
    } catch (e) {
      refused.push(`${path}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
      continue;
    }
    if (fileMatches(path, bytes, digest, uid)) {
      log.info("portable shell installed", { kind, path, sha256: digest });
      return path;
    }
    refused.push(`${path}: does not match after writing`);
  }
  throw new ShellmcpError("CONFIG", `no folder to put the portable ${kind} in: ${refused.join("; ")}`, { refused });
}

/**
 * A symlink named `name` (a role: `codex-execve-wrapper`, `codex-linux-sandbox`) to this executable, for an
 * executable installed without its role links beside it (the npm packages: npm does not pack symlinks). It lives
 * in the first base folder of {@link portableShellBases} that passes the checks above, in
 * `roles-<first 16 hex digits of the SHA-256 of the executable's path>/`, and is checked on each start (a symlink,
 * pointing at exactly `target`; else replaced). Throws `CONFIG` when no base folder qualifies.
 */
export function roleLink(name: string, target: string = process.execPath, bases: readonly string[] = portableShellBases()): string {
  const uid = process.getuid?.() ?? -1;
  const sub = `roles-${sha256(new TextEncoder().encode(target)).slice(0, 16)}`;
  const refused: string[] = [];
  for (const base of bases) {
    const problem = ensureBase(base, uid) ?? ensureFolder(join(base, sub), uid);
    if (problem !== undefined) {
      refused.push(problem);
      continue;
    }
    const link = join(base, sub, name);
    try {
      if (lstatSync(link).isSymbolicLink() && readlinkSync(link) === target) return link;
      unlinkSync(link);
    } catch {
      // missing: made below
    }
    try {
      const tmp = `${link}.${process.pid}.new`;
      symlinkSync(target, tmp);
      renameSync(tmp, link);
      return link;
    } catch (e) {
      refused.push(`${link}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
    }
  }
  throw new ShellmcpError("CONFIG", `no folder for the ${name} link: ${refused.join("; ")}`, { refused });
}

/**
 * Path of the copy of the carried `kind` program that `serve` installed for this user ({@link installPortableShell}:
 * `<base>/shells-<digest>/<kind>` in the first of `bases` that holds it as an executable regular file), or undefined
 * when this executable carries none (run from source, macOS) or none is installed. Only looks: creates, checks and
 * replaces nothing, so it is for a process that runs what it finds inside its own sandbox (the exec wrapper's
 * interpreter for a script without `#!`), never for choosing what runs outside one. Reads and hashes the embedded
 * program (~1.2 MiB for bash, a few ms): for rare paths only.
 *
 * @public loaded with `require` by src/escalate/protocol/wrapper.ts (only there: never on the wrapper's hot path),
 *   which knip does not follow.
 */
export function installedPortableShell(kind: PortableShellKind, bases: readonly string[] = portableShellBases()): string | undefined {
  const bytes = embeddedShell(kind);
  if (bytes === undefined) return undefined;
  const folder = contentFolder(sha256(bytes));
  for (const base of bases) {
    const path = join(base, folder, kind);
    try {
      const st = statSync(path);
      if (st.isFile() && (st.mode & 0o111) !== 0) return path;
    } catch {
      // not installed in this base
    }
  }
  return undefined;
}

/**
 * The embedded `kind` shell's bytes, or undefined when this executable carries none (run from source, or a
 * build for a platform without portable shells: macOS).
 */
export function embeddedShell(kind: PortableShellKind): Uint8Array | undefined {
  if (!IS_COMPILED) return undefined;
  // Loaded only here: from source the assets it names need not exist (build.ts stages them before compiling).
  const { EMBEDDED_SHELLS } = require("./embedded-shells.ts") as typeof import("./embedded-shells.ts");
  const bytes = readFileSync(EMBEDDED_SHELLS[kind]);
  return bytes.length === 0 ? undefined : new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.length);
}
