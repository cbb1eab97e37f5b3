/**
 * Build the single `shellmcp` executable with `bun build --compile`.
 *
 *   bun build.ts                       host target → dist/shellmcp
 *   bun build.ts --target linux-arm64  cross-compile → dist/shellmcp-linux-arm64 (also darwin-x64, darwin-arm64, linux-x64)
 *   bun build.ts --all                 every target above
 *   bun build.ts --release             the host's targets into dist/release/: tarballs, npm packages, SHA256SUMS
 *                                      (SHELLMCP_RELEASE_TARGETS=all or a list: those; scripts/release.ts)
 *
 * Each Linux build embeds the portable patched shells of its platform (`dist/shells-static/<target>/`, built by
 * scripts/build-shells-static.sh) when they exist: they are staged in `dist/embed/` and imported as file assets by
 * `src/carried/embedded-shells.ts`. A build without them (macOS, or a Linux platform whose shells are not built)
 * embeds empty files: that executable uses `dist/shells/` beside it or `SHELLMCP_SHELLS_DIR` (src/serve/setup.ts).
 * `--release` refuses a Linux target without its portable shells.
 *
 * The binary runs inside untrusted repositories, so autoload of `.env`, `bunfig.toml`, `tsconfig.json` and
 * `package.json` from the working directory is turned off. The version comes from package.json through
 * `define`. Cross targets take Bun's runtime for that platform from the npm registry (`@oven/bun-<target>`,
 * the same version as our `bun` dev dependency) instead of letting Bun download it.
 */
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/** The repository root (this file's folder). */
export const ROOT = import.meta.dir;
const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string; devDependencies: Record<string, string> };

/** Worker entrypoints, each embedded in the executable. */
const WORKER_ENTRYPOINTS = ["src/escalate/worker/worker.ts", "src/escalate/decision/inspector.ts"];
/**
 * The roles src/main.ts loads by path (each a bundle of its own, so that a role parses only its own code at start).
 * The worker's and these bundles each carry their own copy of what they share; a process loads main's and one.
 */
const ROLE_ENTRYPOINTS = [
  "src/cli.ts",
  "src/escalate/protocol/wrapper.ts",
  "src/sandbox/linux/helper.ts",
  "src/fs-helper/main.ts",
  "src/sandbox/linux/git-repair-child.ts",
];

/**
 * The JIT tier-up threshold scale the executable starts with (`bun build --compile-jit-policy`; 1 = normal): 8 measured
 * 14.4 against 15.4 MiB of RssAnon for `serve` 5 s idle after `initialize` (median of 6 paired starts; 100: the
 * same), with the same time to the first answered call and the same per-call time (bench/memory.ts, 2026-11-29).
 */
const JIT_POLICY_AT_START = 8;

/** Cross-compilation targets: our name → [Bun's --target, npm package with that runtime]. */
export const TARGETS: Record<string, [string, string]> = {
  "linux-x64": ["bun-linux-x64", "@oven/bun-linux-x64"],
  "linux-arm64": ["bun-linux-arm64", "@oven/bun-linux-aarch64"],
  "darwin-x64": ["bun-darwin-x64", "@oven/bun-darwin-x64"],
  "darwin-arm64": ["bun-darwin-arm64", "@oven/bun-darwin-aarch64"],
};

function run(cmd: string[], cwd = ROOT): void {
  const r = Bun.spawnSync(cmd, { cwd, stdout: "inherit", stderr: "inherit" });
  if (r.exitCode !== 0) throw new Error(`build: \`${cmd.join(" ")}\` failed with status ${r.exitCode}`);
}

/** Path of Bun's runtime binary for `target`, fetched once from the npm registry into `.cache/`. */
function runtimeFor(target: string): string {
  const [, npmName] = TARGETS[target]!;
  const bunVersion = pkg.devDependencies.bun!.replace(/^[^\d]*/, "");
  const dir = join(ROOT, ".cache", "bun-runtimes", `${target}-${bunVersion}`);
  const exe = join(dir, "package", "bin", "bun");
  if (!existsSync(exe)) {
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    // npm's cache goes to .cache/npm, not ~/.npm: a build (and the tests that cross-compile) leaves HOME as it
    // found it (issue 20).
    run(["npm", "pack", "--silent", "--cache", join(ROOT, ".cache", "npm"), `${npmName}@${bunVersion}`], dir);
    run(["sh", "-c", "tar xzf *.tgz && rm -f *.tgz"], dir);
  }
  return exe;
}

/** Our name of the platform this build runs on (`linux-x64`, …). */
export function hostTarget(): string {
  return `${process.platform}-${process.arch}`;
}

/**
 * Stage the portable shells of `target` in `dist/embed/` for `src/carried/embedded-shells.ts`: copies of
 * `dist/shells-static/<target>/{bash,zsh,room-launcher,sandbox-exec}`, or empty files when there are none. Returns whether shells were staged.
 */
export function stageShells(target: string): boolean {
  const from = join(ROOT, "dist", "shells-static", target);
  const to = join(ROOT, "dist", "embed");
  mkdirSync(to, { recursive: true });
  const have = target.startsWith("linux-") && ["bash", "zsh"].every((k) => existsSync(join(from, k)));
  for (const k of ["bash", "zsh"]) {
    if (have) copyFileSync(join(from, k), join(to, k));
    else writeFileSync(join(to, k), "");
  }
  // The room launcher (scripts/build-room-launcher.sh): without it, each escalated program gets a room of its own.
  const launcher = join(from, "room-launcher");
  if (target.startsWith("linux-") && existsSync(launcher)) copyFileSync(launcher, join(to, "room-launcher"));
  else writeFileSync(join(to, "room-launcher"), "");
  // sandbox-exec (scripts/build-sandbox-exec.sh): without it, Landlock calls start the Bun helper.
  const sandboxExec = join(from, "sandbox-exec");
  if (target.startsWith("linux-") && existsSync(sandboxExec)) copyFileSync(sandboxExec, join(to, "sandbox-exec"));
  else writeFileSync(join(to, "sandbox-exec"), "");
  return have;
}

/** Compile `src/main.ts` to `outfile`, for `target` (undefined = host), with that target's portable shells. */
export function compile(outfile: string, target?: string): void {
  stageShells(target ?? hostTarget());
  const cmd = [
    process.execPath,
    "build",
    "--compile",
    "--bytecode",
    "--minify-syntax",
    // Whitespace only: identifiers stay readable in stack traces (issue 25 measured the gain of each).
    "--minify-whitespace",
    // Every role starts with JavaScriptCore's tier-up thresholds ×8: most of a start-up runs once and never pays back
    // its compiling, and the compiler threads keep what they allocated until they end, ~10 s later. The servers
    // (`serve`, `exec-server`) set the normal policy back once started (issue 40: −1.1 MiB of idle RssAnon).
    `--compile-jit-policy=${JIT_POLICY_AT_START}`,
    "--no-compile-autoload-dotenv",
    "--no-compile-autoload-bunfig",
    "--no-compile-autoload-tsconfig",
    "--no-compile-autoload-package-json",
    `--define=__SHELLMCP_VERSION__=${JSON.stringify(pkg.version)}`,
    `--outfile=${outfile}`,
  ];
  if (target !== undefined) {
    const [bunTarget] = TARGETS[target] ?? [];
    if (bunTarget === undefined) throw new Error(`build: unknown target ${target} (known: ${Object.keys(TARGETS).join(", ")})`);
    cmd.push(`--target=${bunTarget}`, `--compile-executable-path=${runtimeFor(target)}`);
  }
  // Workers must be entrypoints of their own: a Worker path not embedded in the executable would be loaded
  // from disk relative to the cwd, i.e. from the untrusted repository.
  cmd.push(join(ROOT, "src", "main.ts"), ...[...WORKER_ENTRYPOINTS, ...ROLE_ENTRYPOINTS].map((w) => join(ROOT, w)));
  run(cmd);
}

if (import.meta.main) {
  const argv = process.argv.slice(2);
  mkdirSync(join(ROOT, "dist"), { recursive: true });
  if (argv.includes("--release")) {
    // scripts/release.ts builds on this file (compile, TARGETS), so it runs as a program of its own rather than
    // being imported: the build and the release do not import each other (docs/architecture.md, "Layering").
    // It prints its own one-line errors: pass its status on without a second message and stack trace.
    const r = Bun.spawnSync([process.execPath, join(ROOT, "scripts", "release.ts")], { cwd: ROOT, stdout: "inherit", stderr: "inherit" });
    if (r.exitCode !== 0) process.exit(r.exitCode ?? 1);
  } else if (argv.includes("--all")) {
    for (const t of Object.keys(TARGETS)) compile(join(ROOT, "dist", `shellmcp-${t}`), t);
  } else if (argv[0] === "--target" && argv[1] !== undefined) {
    compile(join(ROOT, "dist", `shellmcp-${argv[1]}`), argv[1]);
  } else {
    compile(join(ROOT, "dist", "shellmcp"));
    // The roles by name, next to the binary (serve uses them; they stay readable under restricted reads).
    for (const role of ["codex-execve-wrapper", "codex-linux-sandbox", "codex-fs"]) {
      rmSync(join(ROOT, "dist", role), { force: true });
      symlinkSync("shellmcp", join(ROOT, "dist", role));
    }
  }
}
