/**
 * `bun build.ts --release` (which runs this file with the Bun that runs build.ts, process.execPath: no `bun` on PATH needed): every release artifact of this version into `dist/release/`:
 *
 * - `shellmcp-<version>-<target>.tar.gz` per target (linux-x64, linux-arm64, darwin-x64, darwin-arm64): a folder
 *   `shellmcp-<version>-<target>/` with the executable, its role links (`codex-execve-wrapper`,
 *   `codex-linux-sandbox`, `codex-fs`) and a README;
 * - the npm packages: `shellmcp-<target>-<version>.tgz` (`@shellmcp/<target>`, selected by its `os`/`cpu`) per
 *   target and the launcher `shellmcp-<version>.tgz` (`npm/shellmcp/`, whose optionalDependencies name them);
 * - `SHA256SUMS` over all of them (`sha256sum -c SHA256SUMS` checks them).
 *
 * Which targets: by default the host's ({@link releaseTargets}: the host OS's targets that can be built here, each
 * other one skipped with a one-line reason); `SHELLMCP_RELEASE_TARGETS=linux-x64,darwin-arm64` (or `all`) names
 * them. Linux executables carry their portable patched shells (scripts/build-shells-static.sh must have built
 * `dist/shells-static/<target>/`): a named Linux target without them is refused. macOS executables carry no
 * shells: the user builds them with scripts/build-shells-macos.sh (the launcher says so). Every tarball carries
 * the starter policy (`rules/agent.rules`, `config.toml.example`: what `shellmcp init` writes). Failures are one
 * line on stderr, status 1.
 */
import { chmodSync, copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { compile, ROOT, TARGETS } from "../build.ts";
import { DOCS_WHERE } from "../src/version.ts";

/** npm's `os` and `cpu` of each target. */
const NPM_PLATFORM: Record<string, { os: string; cpu: string }> = {
  "linux-x64": { os: "linux", cpu: "x64" },
  "linux-arm64": { os: "linux", cpu: "arm64" },
  "darwin-x64": { os: "darwin", cpu: "x64" },
  "darwin-arm64": { os: "darwin", cpu: "arm64" },
};

/** The role links shipped beside the executable in a tarball. */
const ROLE_LINKS = ["codex-execve-wrapper", "codex-linux-sandbox", "codex-fs"];

function run(cmd: string[], cwd: string): string {
  const r = Bun.spawnSync(cmd, { cwd, stdout: "pipe", stderr: "pipe" });
  if (r.exitCode !== 0) throw new Error(`release: \`${cmd.join(" ")}\` failed (${r.exitCode}): ${r.stderr.toString()}`);
  return r.stdout.toString();
}

/** The version of the repository's package.json, checked against the launcher's package.json. */
export function releaseVersion(): string {
  const version = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string }).version;
  const launcher = JSON.parse(readFileSync(join(ROOT, "npm", "shellmcp", "package.json"), "utf8")) as {
    version: string;
    optionalDependencies: Record<string, string>;
  };
  const wrong = [["shellmcp", launcher.version], ...Object.entries(launcher.optionalDependencies)].filter(([, v]) => v !== version);
  if (wrong.length > 0)
    throw new Error(
      `release: npm/shellmcp/package.json must name version ${version} throughout (got ${wrong.map((w) => w.join("@")).join(", ")})`,
    );
  return version;
}

/** `npm pack` the package in `dir` into `dest`; returns the tarball's file name. */
function npmPack(dir: string, dest: string): string {
  const out = run(["npm", "pack", "--silent", "--pack-destination", dest, "--cache", join(ROOT, ".cache", "npm")], dir);
  return out.trim().split("\n").pop()!;
}

/** Whether `target`'s executable can be built here: a Linux one needs its portable shells. */
function hasShells(target: string): boolean {
  return !target.startsWith("linux-") || ["bash", "zsh"].every((k) => existsSync(join(ROOT, "dist", "shells-static", target, k)));
}

/** How to build the portable shells of Linux `target`. */
function shellsHint(target: string): string {
  return `bash scripts/build-shells-static.sh --arch ${target === "linux-x64" ? "x86_64" : "aarch64"}`;
}

/**
 * The targets to build and those left out, each with why (issue 41). `SHELLMCP_RELEASE_TARGETS` (comma-separated
 * names, or `all`) names them: a named Linux target without its portable shells is an error. Without it, the host's
 * targets: those of the host's OS (`linux-*` on Linux, `darwin-*` on macOS) that can be built here; the others are
 * skipped, each with its reason (another OS: cross-compiled only when named, since the release of another OS is
 * tested there; no portable shells: the command that builds them).
 * @throws Error naming an unknown target, or a named one that cannot be built
 */
export function releaseTargets(
  env: Record<string, string | undefined> = process.env,
  hostOs: string = process.platform,
  buildable: (t: string) => boolean = hasShells,
): { build: string[]; skipped: { target: string; why: string }[] } {
  const all = Object.keys(TARGETS);
  const named = env.SHELLMCP_RELEASE_TARGETS?.split(",").filter((t) => t !== "");
  if (named !== undefined && named.length > 0) {
    const list = named.includes("all") ? all : named;
    const unknown = list.filter((t) => !all.includes(t));
    if (unknown.length > 0)
      throw new Error(`unknown target ${unknown.join(", ")} in SHELLMCP_RELEASE_TARGETS (known: ${all.join(", ")}, all)`);
    const missing = list.filter((t) => !buildable(t));
    if (missing.length > 0)
      throw new Error(
        `no portable shells for ${missing.join(", ")}: ${missing.map(shellsHint).join("; ")}, or leave it out of SHELLMCP_RELEASE_TARGETS`,
      );
    return { build: all.filter((t) => list.includes(t)), skipped: [] };
  }
  const build: string[] = [];
  const skipped: { target: string; why: string }[] = [];
  for (const t of all) {
    if (!t.startsWith(`${hostOs}-`))
      skipped.push({ target: t, why: `another OS than this ${hostOs} host (cross-compile it with SHELLMCP_RELEASE_TARGETS=${t} or =all)` });
    else if (!buildable(t)) skipped.push({ target: t, why: `no portable shells in dist/shells-static/${t}/ (${shellsHint(t)})` });
    else build.push(t);
  }
  if (build.length === 0) throw new Error(`nothing to build on this host: ${skipped.map((s) => `${s.target}: ${s.why}`).join("; ")}`);
  return { build, skipped };
}

/** Build every artifact of the chosen targets ({@link releaseTargets}; see the top of this file); returns the artifacts' file names. */
export function release(): string[] {
  const version = releaseVersion();
  const { build: targets, skipped } = releaseTargets();
  for (const s of skipped) console.error(`release: skipped ${s.target}: ${s.why}`);
  const out = join(ROOT, "dist", "release");
  const stage = join(out, "stage");
  rmSync(out, { recursive: true, force: true });
  mkdirSync(stage, { recursive: true });
  const artifacts: string[] = [];

  for (const t of targets) {
    const { os, cpu } = NPM_PLATFORM[t]!;
    const exe = join(stage, `shellmcp-${t}`);
    compile(exe, t);
    const note =
      os === "darwin"
        ? "macOS: build the patched shells once with scripts/build-shells-macos.sh (in a clone of the repository), then run\n" +
          "`SHELLMCP_SHELLS_DIR=<clone>/dist/shells ./shellmcp serve`.\n"
        : "The patched bash and zsh are inside the executable (copied to a checked folder at start).\n";
    // The tarball: executable, role links, README.
    const name = `shellmcp-${version}-${t}`;
    const dir = join(stage, "tar", name);
    mkdirSync(dir, { recursive: true });
    copyFileSync(exe, join(dir, "shellmcp"));
    chmodSync(join(dir, "shellmcp"), 0o755);
    for (const role of ROLE_LINKS) symlinkSync("shellmcp", join(dir, role));
    // The documentation the help names (src/version.ts DOCS_WHERE): every page of docs/.
    mkdirSync(join(dir, "docs"));
    for (const page of readdirSync(join(ROOT, "docs")))
      if (page.endsWith(".md")) copyFileSync(join(ROOT, "docs", page), join(dir, "docs", page));
    // The starter policy (what `shellmcp init` writes into CODEX_HOME; the executable carries the same files).
    mkdirSync(join(dir, "starter", "rules"), { recursive: true });
    copyFileSync(join(ROOT, "examples", "rules", "agent.rules"), join(dir, "starter", "rules", "agent.rules"));
    copyFileSync(join(ROOT, "examples", "config", "starter.toml"), join(dir, "starter", "config.toml"));
    writeFileSync(
      join(dir, "README.txt"),
      `shellmcp ${version} for ${t}: a sandboxed shell for AI agents (MCP server).\n\n` +
        `    ./shellmcp init claude      # or gemini, codex, vscode, cursor: the starter policy and the client's MCP config\n` +
        `    ./shellmcp serve            # the MCP server on stdio (what init puts in the client's config)\n    ./shellmcp --help\n\n` +
        `starter/ holds the starter policy init writes: rules/agent.rules (to ~/.codex/rules/) and config.toml (merged\n` +
        `into ~/.codex/config.toml). Documentation: ${DOCS_WHERE}\n\n${note}`,
    );
    run(["tar", "--owner=0", "--group=0", "--numeric-owner", "--sort=name", "-czf", join(out, `${name}.tar.gz`), name], join(stage, "tar"));
    artifacts.push(`${name}.tar.gz`);
    // The npm platform package.
    const pkgDir = join(stage, "npm", t);
    mkdirSync(join(pkgDir, "bin"), { recursive: true });
    copyFileSync(exe, join(pkgDir, "bin", "shellmcp"));
    chmodSync(join(pkgDir, "bin", "shellmcp"), 0o755);
    writeFileSync(
      join(pkgDir, "package.json"),
      JSON.stringify(
        {
          name: `@shellmcp/${t}`,
          version,
          description: `The shellmcp executable for ${t} (installed by the \`shellmcp\` package)`,
          license: "Apache-2.0",
          os: [os],
          cpu: [cpu],
          files: ["bin/shellmcp", "README.md"],
          preferUnplugged: true,
        },
        null,
        2,
      ) + "\n",
    );
    writeFileSync(
      join(pkgDir, "README.md"),
      `# @shellmcp/${t}\n\nThe \`shellmcp\` executable for ${t}. Install \`shellmcp\` instead: \`npx -y shellmcp serve\`.\n\n${note}`,
    );
    artifacts.push(npmPack(pkgDir, out));
  }
  // The launcher, straight from the repository (npm/shellmcp/), with the README.
  const launcher = join(stage, "npm", "shellmcp");
  mkdirSync(join(launcher, "bin"), { recursive: true });
  copyFileSync(join(ROOT, "npm", "shellmcp", "package.json"), join(launcher, "package.json"));
  copyFileSync(join(ROOT, "npm", "shellmcp", "bin", "shellmcp.js"), join(launcher, "bin", "shellmcp.js"));
  chmodSync(join(launcher, "bin", "shellmcp.js"), 0o755);
  copyFileSync(join(ROOT, "README.md"), join(launcher, "README.md"));
  artifacts.push(npmPack(launcher, out));

  const sums = artifacts.map((a) => `${new Bun.CryptoHasher("sha256").update(readFileSync(join(out, a))).digest("hex")}  ${a}\n`).join("");
  writeFileSync(join(out, "SHA256SUMS"), sums);
  rmSync(stage, { recursive: true, force: true });
  for (const a of readdirSync(out)) console.log(`dist/release/${a}`);
  return artifacts;
}

if (import.meta.main) {
  try {
    release();
  } catch (e) {
    // One line, no stack trace: what failed and what to do is in the message.
    console.error(`release: ${(e instanceof Error ? e.message : String(e)).replace(/^(release|build): /, "")}`);
    process.exit(1);
  }
}
