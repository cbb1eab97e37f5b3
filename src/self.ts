/**
 * How this process was started, and how to reach the code it carries: from the compiled executable (every module
 * embedded in Bun's read-only `/$bunfs/` filesystem) or from the source tree (`bun src/main.ts`, `bun test`).
 *
 * Why this module exists: under `bun build --compile --bytecode`, `import.meta.url` keeps the *source* path the
 * module was compiled from (`file:///…/src/escalate/server.ts`), so `new URL("./worker.ts", import.meta.url)`
 * made the executable load its escalation worker, and through it `ffi/`, from the checkout it was built in, and
 * cache their transpilation under `~/.bun/install/cache/`. The executable then failed wherever that checkout was
 * missing, and where it existed, anyone able to write it (a sandboxed command whose project is the checkout, or
 * whose HOME is writable) chose the code that decides escalations. Embedded paths are looked up in `/$bunfs/`
 * before any file on disk (checked: a planted `/$bunfs/root/…` or `./escalate/worker.ts` is never loaded).
 */

import { closeSync, existsSync, openSync } from "node:fs";
import { homedir } from "node:os";
import { isAbsolute } from "node:path";

/** Prefix of every module path inside a compiled Bun executable (Linux and macOS). */
export const EMBEDDED_ROOT = "/$bunfs/root/";

/**
 * Whether this process is the compiled executable. `Bun.main` is `/$bunfs/root/<outfile name>` there and the
 * entry script's path on disk otherwise.
 */
export const IS_COMPILED: boolean = Bun.main.startsWith(EMBEDDED_ROOT);

/**
 * URL of a worker entrypoint, given by its path relative to `src/` without extension (`"escalate/worker"`):
 * in the compiled executable, the copy embedded by build.ts (`/$bunfs/root/escalate/worker.js`: the layout is the
 * entrypoints' common folder, `src/`, with `.ts` compiled to `.js`); from source, the file next to this module.
 * A worker that build.ts did not embed fails to start (ModuleNotFound) instead of being read from disk.
 */
export function workerUrl(srcRelative: string): string {
  return IS_COMPILED ? `${EMBEDDED_ROOT}${srcRelative}.js` : new URL(`./${srcRelative}.ts`, import.meta.url).href;
}

/**
 * argv that starts this program again by its path: the executable alone when compiled; Bun plus the entry script
 * from source. For a command that runs inside a sandbox's own mount namespace (bwrap's inner stage, the codex-fs
 * role inside a sandbox), where the path is looked up in the sandbox's view of the files.
 */
export function selfCommand(): string[] {
  return IS_COMPILED ? [process.execPath] : [process.execPath, Bun.main];
}

let selfExe: string | undefined;

/**
 * The kernel's name for the file this process runs: `/proc/self/exe`, exec'd by this process's own children
 * before their exec (posix_spawn, Bun.spawn) — it opens the file this process was started from even when its
 * path has since been replaced. Only a direct child may exec it: a trampoline (the cgroup `/bin/sh`, the room's
 * bash) would resolve it to itself, and `/proc/<pid>/exe` of the non-dumpable `serve` is closed to its children
 * unless they are root; callers spawn it directly and move the child into its cgroup afterwards
 * (see {@link isSelfExe}). `process.execPath` where `/proc` is not mounted. Linux only ({@link selfExecCommand}).
 */
export function selfExePath(): string {
  if (selfExe === undefined) selfExe = existsSync("/proc/self/exe") ? "/proc/self/exe" : process.execPath;
  return selfExe;
}

/** Whether `path` is {@link selfExePath} (the program must then be spawned directly, never through a trampoline). */
export function isSelfExe(path: string | undefined): boolean {
  return path !== undefined && path.startsWith("/proc/") && path === selfExePath();
}

/** Variables that make a compiled Bun executable something else: the bun CLI itself, or a preload. */
const BUN_RUNTIME_VARS = ["BUN_BE_BUN", "BUN_OPTIONS"];

/**
 * `env` without the variables that would turn this executable into the bun CLI (`BUN_BE_BUN`: it then loads a
 * `bunfig.toml` preload from its working folder, the sandbox's workspace) or add a preload (`BUN_OPTIONS`), for a
 * process that runs it outside every sandbox (the sandbox helper). A new object; `env` is not changed. The
 * command the helper runs inside the sandbox does not get them either.
 */
export function envForSelf<T extends Record<string, string | undefined>>(env: T): T {
  if (!BUN_RUNTIME_VARS.some((k) => k in env)) return env;
  const copy = { ...env };
  for (const k of BUN_RUNTIME_VARS) delete copy[k];
  return copy;
}

/**
 * argv that starts this program again from this process, spawned directly by it (outside any sandbox): compiled on
 * Linux, {@link selfExePath} — the file this process was started from, even when its path has since been replaced
 * (a sandboxed command that can write the folder of the executable, `~/.npm/_npx/…` under a writable HOME, could put
 * another program there; exec'd by path, that program would be the next sandbox helper, outside every sandbox).
 * Elsewhere (macOS, or from source) {@link selfCommand}. The role is chosen by argv[0] or a `--codex-run-as-*`
 * flag, never by this path's name.
 */
export function selfExecCommand(): string[] {
  return IS_COMPILED && process.platform === "linux" ? [selfExePath()] : selfCommand();
}

// This process's home folder, without depending on a passwd entry (issue 44: OpenShift's arbitrary uids and images
// built from scratch run shellmcp as a uid that has none, often with HOME unset). Node's and Bun's `os.homedir()`
// read `$HOME`, then the passwd entry, and throw `ENOENT … uv_os_homedir` when there is neither: every caller in
// shellmcp goes through userHome instead.

/**
 * This process's HOME (an absolute path; it need not exist): `$HOME` when it is absolute (as `os.homedir()` reads
 * it), else the passwd entry's home, else `/` — what container runtimes give a uid without a passwd entry (runc sets
 * `HOME=/` then), so CODEX_HOME defaults to `/.codex` and the credential stores to `/.ssh` …, which such a process
 * rarely has. Read at each call: Bun's `homedir()` keeps the value `$HOME` had at start, and tests that give the
 * process another HOME must see that one. Never throws.
 */
export function userHome(): string {
  const h = process.env.HOME;
  if (h !== undefined && isAbsolute(h)) return h;
  try {
    return homedir();
  } catch {
    return "/"; // no HOME and no passwd entry (ENOENT … uv_os_homedir)
  }
}

let selfExeFd: number | undefined;

/**
 * A read-only fd of the file this process runs (`/proc/self/exe`: the genuine executable even when its path has
 * since been replaced), opened once and kept (close-on-exec): given to bubblewrap as `--ro-bind-fd` so the inner
 * stage inside the sandbox is that file (src/sandbox/linux/bwrap.ts `planBwrap`), and to a lifeline guard as
 * `--exec-fd`. Undefined where it cannot be opened (no /proc: not Linux).
 */
export function openSelfExe(): number | undefined {
  if (selfExeFd === undefined) {
    try {
      selfExeFd = openSync("/proc/self/exe", "r");
    } catch {
      return undefined;
    }
  }
  return selfExeFd;
}

/**
 * Close this thread's {@link openSelfExe} fd, if it opened one (the next call opens it again): for a thread that
 * ends while the process lives on (the escalation worker when it parks, src/escalate/worker/port.ts: each worker
 * thread has its own copy of this module, and each fd it opened is the process's). Only when nothing spawned by the
 * thread still needs it (its copies in children are their own). Idempotent.
 */
export function closeSelfExe(): void {
  if (selfExeFd === undefined) return;
  try {
    closeSync(selfExeFd);
  } catch {
    // already closed
  }
  selfExeFd = undefined;
}
