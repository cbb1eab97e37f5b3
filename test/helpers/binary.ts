/**
 * Test helpers for the compiled binary: its path (built once if missing), and running it under another
 * arg0 through a symlink.
 */
import { expect } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { CONF_BASE } from "./test-dirs.ts";

/** Repository root. */
export const ROOT = resolve(import.meta.dir, "..", "..");
/** Path of the compiled binary. */
export const BINARY = join(ROOT, "dist", "shellmcp");
/** Path of Bun itself (the test runner). */
export const BUN = process.execPath;

/** Ensure `dist/shellmcp` exists, building it if needed (`.ci/run` builds it first, so this is for local runs). */
export function ensureBinary(): string {
  if (!existsSync(BINARY)) {
    const r = Bun.spawnSync([BUN, join(ROOT, "build.ts")], { cwd: ROOT, stdout: "inherit", stderr: "inherit" });
    if (r.exitCode !== 0) throw new Error("building dist/shellmcp failed");
  }
  return BINARY;
}

/** A fresh temporary directory. */
export function tempDir(prefix = "shellmcp-test-"): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

/**
 * A fresh folder for a server's CODEX_HOME (or HOME), outside every default writable root (test-dirs.ts
 * CONF_BASE): `serve` refuses a CODEX_HOME under /tmp or $TMPDIR, which sandboxed commands can write (issue 34).
 */
export function homeDir(prefix = "shellmcp-home-"): string {
  return mkdtempSync(join(CONF_BASE, prefix));
}

/** Symlink the binary as `name` in a temp dir; returns the link path. */
export function binaryAs(name: string, dir: string = tempDir()): string {
  const link = join(dir, name);
  if (!existsSync(link)) symlinkSync(ensureBinary(), link);
  return link;
}

/** Result of a finished process. */
export interface RunResult {
  exitCode: number;
  stdout: string;
  stderr: string;
}

/** Run `argv` to completion. */
export function run(argv: string[], opts: { cwd?: string; env?: Record<string, string | undefined>; stdin?: string } = {}): RunResult {
  const r = Bun.spawnSync(argv, {
    cwd: opts.cwd,
    env: opts.env as Record<string, string> | undefined,
    stdin: opts.stdin === undefined ? "ignore" : Buffer.from(opts.stdin),
    stdout: "pipe",
    stderr: "pipe",
  });
  return { exitCode: r.exitCode ?? -1, stdout: r.stdout.toString(), stderr: r.stderr.toString() };
}

/**
 * Cross-compile with `build.ts --target <target>` and return the executable's bytes (`dist/shellmcp-<target>`).
 * Bun's own cache (it may install what the target needs) goes to a HOME under the run's TMPDIR (`tmpdir()`: the
 * test preload points it at the run's own folder; not imported from test-dirs.ts, whose import makes folders — the
 * benches import this file), and build.ts keeps
 * npm's cache in `.cache/npm`, so the host's HOME is left as it was (issue 20). Fails the test with build.ts's
 * stderr when the build fails.
 */
export function crossBuild(target: string): Buffer {
  const env = { ...process.env, HOME: join(tmpdir(), "xcompile-home") };
  const r = Bun.spawnSync([BUN, join(ROOT, "build.ts"), "--target", target], { cwd: ROOT, env, stdout: "pipe", stderr: "pipe" });
  expect(r.exitCode, r.stderr.toString()).toBe(0);
  return readFileSync(join(ROOT, "dist", `shellmcp-${target}`));
}
