/**
 * Shared helpers for bench/ scripts: timing repeated process start-ups, and locating the reference
 * programs from the npm dev dependencies. Benchmarks print figures; they never assert.
 */
import { existsSync, mkdtempSync, rmdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join, resolve } from "node:path";

/** Repository root. */
export const ROOT = resolve(import.meta.dir, "..");

/**
 * A fresh folder `<tmpdir>/<prefix>XXXXXX`, removed with everything in it when the process exits; and then its
 * parent too when that is the run folder test/helpers/test-dirs.ts made this process's TMPDIR (`shellmcp-run-<pid>`,
 * when the bench imports a test helper): that module's own exit handler ran first and found it not yet empty.
 */
export function benchDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  process.on("exit", () => {
    rmSync(dir, { recursive: true, force: true });
    if (basename(dirname(dir)) === `shellmcp-run-${process.pid}`)
      try {
        rmdirSync(dirname(dir));
      } catch {
        // not empty: left for whoever checks
      }
  });
  return dir;
}

/**
 * A fresh folder for a server's HOME and CODEX_HOME outside /tmp, $TMPDIR and /dev/shm (`/var/tmp/<prefix>XXXXXX`):
 * `serve` refuses to load rules and config from a CODEX_HOME a sandboxed command could write. Removed at exit.
 */
export function benchHome(prefix: string): string {
  const dir = mkdtempSync(join("/var/tmp", prefix));
  process.on("exit", () => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Directory of the reference shell-tool MCP (0.97.0) binaries for this host, or undefined. */
export function referenceShellToolDir(): string | undefined {
  const triple = process.arch === "arm64" ? "aarch64-unknown-linux-musl" : "x86_64-unknown-linux-musl";
  const dir = join(ROOT, "node_modules", "@openai", "codex-shell-tool-mcp", "vendor", triple);
  return existsSync(dir) ? dir : undefined;
}

/**
 * Codex 0.97.0's own `codex` binary (`@openai/codex-0.97`, i.e. `npm:@openai/codex@0.97.0`) for this host, or
 * undefined. It is also Codex 0.97's Linux sandbox helper: Codex sends its own path (`current_exe()`) as
 * `codexLinuxSandboxExe`, and the MCP server runs it with arg0 `codex-linux-sandbox`.
 */
export function codex097Exe(): string | undefined {
  const triple = process.arch === "arm64" ? "aarch64-unknown-linux-musl" : "x86_64-unknown-linux-musl";
  const exe = join(ROOT, "node_modules", "@openai", "codex-0.97", "vendor", triple, "codex", "codex");
  return existsSync(exe) ? exe : undefined;
}

/**
 * Codex 0.169's `codex` binary (`@openai/codex` 0.169, its platform package) for this host, or undefined. Run with
 * arg0 `codex-linux-sandbox` it is Codex's current Linux sandbox helper: bubblewrap for the filesystem, then itself
 * again inside (`--apply-seccomp-then-exec`) for `no_new_privs` and the seccomp filter. Its input is a permission
 * profile (`--sandbox-policy-cwd C --command-cwd C --permission-profile JSON -- CMD`), not 0.97's `--sandbox-policy`.
 */
export function codex0169Exe(): string | undefined {
  const pkg = process.arch === "arm64" ? "codex-linux-arm64" : "codex-linux-x64";
  const triple = process.arch === "arm64" ? "aarch64-unknown-linux-musl" : "x86_64-unknown-linux-musl";
  const exe = join(ROOT, "node_modules", "@openai", pkg, "vendor", triple, "bin", "codex");
  return existsSync(exe) ? exe : undefined;
}

/** Median of `xs`. */
export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/**
 * Median of the per-round ratios `a[i] / b[i]`, where `a` and `b` were measured alternately in the same rounds:
 * on a machine whose speed drifts (a shared VM), this cancels the drift that a ratio of two medians keeps.
 */
export function pairedRatio(a: number[], b: number[]): number {
  return median(a.map((x, i) => x / b[i]!));
}

/**
 * Time `runs` sequential spawns of `argv` (stdio ignored); returns the median wall time of one start in ms.
 * Repeats in `rounds` rounds and takes the median round to damp noise from the other core.
 */
export function timeSpawns(argv: string[], runs = 200, rounds = 5, argv0?: string): number {
  const perRound: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const t0 = Bun.nanoseconds();
    for (let i = 0; i < runs; i++) {
      Bun.spawnSync(argv, { stdin: "ignore", stdout: "ignore", stderr: "ignore", argv0 } as Parameters<typeof Bun.spawnSync>[1]);
    }
    perRound.push((Bun.nanoseconds() - t0) / 1e6 / runs);
  }
  return median(perRound);
}

/** Print one row of a results table. */
export function row(name: string, ms: number, base?: number): void {
  const ratio = base === undefined ? "" : `  ${(ms / base).toFixed(2)}×`;
  console.log(`${name.padEnd(44)} ${ms.toFixed(3).padStart(9)} ms${ratio}`);
}

/**
 * Per-exec cost of one variant, pushed to `into` (ms): `run` times a bash script (ms from spawn to exit), once with
 * a loop of 0 execs and once with `n`; the difference divided by `n` leaves out the shell's own start and end.
 * `loop(n)` builds the script.
 */
export async function perExec(
  run: (script: string) => Promise<number>,
  loop: (n: number) => string,
  n: number,
  into: number[],
): Promise<void> {
  const base = await run(loop(0));
  const full = await run(loop(n));
  into.push((full - base) / n);
}

/** The `initialize` request the start-up benches send (protocol 2025-06-18, elicitation declared), one JSON line. */
export const INITIALIZE_LINE =
  JSON.stringify({
    jsonrpc: "2.0",
    id: 1,
    method: "initialize",
    params: { protocolVersion: "2025-06-18", capabilities: { elicitation: {} }, clientInfo: { name: "bench", version: "0" } },
  }) + "\n";

/**
 * Ms from spawning `argv` (with `env`) to the first byte of its answer to {@link INITIALIZE_LINE}; the process is
 * then ended and reaped.
 */
export async function initializeOnce(argv: string[], env: Record<string, string>): Promise<number> {
  const t0 = Bun.nanoseconds();
  const p = Bun.spawn(argv, { env, stdin: "pipe", stdout: "pipe", stderr: "ignore" });
  await p.stdin.write(INITIALIZE_LINE);
  await p.stdin.flush();
  await p.stdout.getReader().read();
  const ms = (Bun.nanoseconds() - t0) / 1e6;
  await p.stdin.end();
  p.kill();
  await p.exited;
  return ms;
}
