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
 * Linux executables carry their portable patched shells (scripts/build-shells-static.sh must have built
 * `dist/shells-static/<target>/`): a Linux target without them is refused, unless `SHELLMCP_RELEASE_TARGETS`
 * leaves it out (e.g. `SHELLMCP_RELEASE_TARGETS=linux-x64,darwin-x64,darwin-arm64`). macOS executables carry no
 * shells: the user builds them with scripts/build-shells-macos.sh (the launcher says so).
 */
import { chmodSync, copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { compile, ROOT, TARGETS } from "../build.ts";

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

/** Build every artifact (see the top of this file); returns the artifacts' file names. */
export function release(): string[] {
  const version = releaseVersion();
  const only = process.env.SHELLMCP_RELEASE_TARGETS?.split(",").filter((t) => t !== "");
  const targets = Object.keys(TARGETS).filter((t) => only === undefined || only.includes(t));
  for (const t of targets) {
    if (t.startsWith("linux-") && !["bash", "zsh"].every((k) => existsSync(join(ROOT, "dist", "shells-static", t, k))))
      throw new Error(
        `release: no portable shells for ${t} (bash scripts/build-shells-static.sh --arch ${t === "linux-x64" ? "x86_64" : "aarch64"}), ` +
          `or leave ${t} out with SHELLMCP_RELEASE_TARGETS`,
      );
  }
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
    writeFileSync(
      join(dir, "README.txt"),
      `shellmcp ${version} for ${t}: a sandboxed shell for AI agents (MCP server).\n\n` +
        `    ./shellmcp serve            # the MCP server on stdio\n    ./shellmcp --help\n\n${note}`,
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

if (import.meta.main) release();
