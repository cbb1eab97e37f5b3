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

/** argv that starts this program again: the executable alone when compiled; Bun plus the entry script from source. */
export function selfCommand(): string[] {
  return IS_COMPILED ? [process.execPath] : [process.execPath, Bun.main];
}
