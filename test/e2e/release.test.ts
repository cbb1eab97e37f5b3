/**
 * `bun build.ts --release` (issue 25), for linux-x64 and darwin-arm64 (`SHELLMCP_RELEASE_TARGETS`): per target a
 * tarball (executable, role links, README) and an npm platform package selected by `os`/`cpu`, the launcher
 * package, and `SHA256SUMS` that `sha256sum -c` accepts. The Linux executable carries the portable shells; the
 * darwin one carries none (macOS shells are built on the Mac).
 */
import { describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { BUN, ROOT, run } from "../helpers/binary.ts";
import { skipWithout } from "../helpers/prereq.ts";
import { CONF_BASE, RUN_TMP } from "../helpers/test-dirs.ts";

const STATIC = join(ROOT, "dist", "shells-static", "linux-x64");
const missing =
  process.platform !== "linux" || process.arch !== "x64"
    ? "release builds are checked on linux-x64"
    : ["bash", "zsh"].every((k) => existsSync(join(STATIC, k)))
      ? undefined
      : "no portable shells for linux-x64 (bash scripts/build-shells-static.sh)";

describe.skipIf(skipWithout("release artifacts", missing))("bun build.ts --release", () => {
  test("tarballs, npm packages and checksums for linux-x64 and darwin-arm64", () => {
    const version = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")).version as string;
    // Issue 31, item 5: the release build must not need Bun on PATH (a checkout has it in node_modules/.bin only):
    // every folder of PATH holding a `bun` is left out, and so is node_modules/.bin.
    const path = (process.env.PATH ?? "/usr/bin:/bin")
      .split(":")
      .filter((d) => d !== "" && !existsSync(join(d, "bun")) && !d.includes("node_modules"))
      .join(":");
    expect(Bun.which("bun", { PATH: path })).toBeNull();
    const r = Bun.spawnSync([BUN, join(ROOT, "build.ts"), "--release"], {
      cwd: ROOT,
      env: { ...process.env, PATH: path, HOME: join(RUN_TMP, "release-home"), SHELLMCP_RELEASE_TARGETS: "linux-x64,darwin-arm64" },
      stdout: "pipe",
      stderr: "pipe",
    });
    expect(r.exitCode, r.stderr.toString()).toBe(0);
    const rel = join(ROOT, "dist", "release");
    const names = [
      `shellmcp-${version}-linux-x64.tar.gz`,
      `shellmcp-linux-x64-${version}.tgz`,
      `shellmcp-${version}-darwin-arm64.tar.gz`,
      `shellmcp-darwin-arm64-${version}.tgz`,
      `shellmcp-${version}.tgz`,
    ];
    const sums = readFileSync(join(rel, "SHA256SUMS"), "utf8");
    expect(
      sums
        .trim()
        .split("\n")
        .map((l) => l.split("  ")[1])
        .sort(),
    ).toEqual([...names].sort());
    const check = run(["sha256sum", "-c", "SHA256SUMS"], { cwd: rel });
    expect(check.exitCode, check.stdout + check.stderr).toBe(0);

    // The tarball: the executable with its role links, which runs and carries the portable shells.
    const out = mkdtempSync(join(CONF_BASE, "release-"));
    expect(run(["tar", "-xzf", join(rel, names[0]!), "-C", out]).exitCode).toBe(0);
    const dir = join(out, `shellmcp-${version}-linux-x64`);
    expect(run(["readlink", join(dir, "codex-execve-wrapper")]).stdout.trim()).toBe("shellmcp");
    expect(run([join(dir, "shellmcp"), "--version"]).stdout.trim()).toBe(version);
    const exe = readFileSync(join(dir, "shellmcp"));
    const bash = readFileSync(join(STATIC, "bash"));
    expect(exe.indexOf(bash.subarray(bash.length >> 1, (bash.length >> 1) + 256))).toBeGreaterThan(0);

    // The npm platform packages: os/cpu, the executable (mode 0755).
    for (const [t, os, cpu] of [
      ["linux-x64", "linux", "x64"],
      ["darwin-arm64", "darwin", "arm64"],
    ] as const) {
      const pkgOut = mkdtempSync(join(CONF_BASE, "pkg-"));
      expect(run(["tar", "-xzf", join(rel, `shellmcp-${t}-${version}.tgz`), "-C", pkgOut]).exitCode).toBe(0);
      const pkg = JSON.parse(readFileSync(join(pkgOut, "package", "package.json"), "utf8"));
      expect(pkg).toMatchObject({ name: `@shellmcp/${t}`, version, os: [os], cpu: [cpu] });
      const listing = run(["tar", "-tvzf", join(rel, `shellmcp-${t}-${version}.tgz`)]).stdout;
      expect(listing).toMatch(/-rwxr-xr-x .* package\/bin\/shellmcp\n/);
      if (os === "darwin") {
        const mach = readFileSync(join(pkgOut, "package", "bin", "shellmcp"));
        expect(mach.readUInt32LE(0)).toBe(0xfeedfacf); // MH_MAGIC_64
        expect(mach.indexOf(bash.subarray(bash.length >> 1, (bash.length >> 1) + 256))).toBe(-1); // no Linux shells
      }
    }
  }, 240_000);

  test("issue 41: by default the host's targets; each skipped one said in one line, no stack trace; the starter policy in the tarball", () => {
    const version = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")).version as string;
    const env: Record<string, string> = { ...(process.env as Record<string, string>), HOME: join(RUN_TMP, "release-home") };
    delete env.SHELLMCP_RELEASE_TARGETS;
    const r = Bun.spawnSync([BUN, join(ROOT, "build.ts"), "--release"], { cwd: ROOT, env, stdout: "pipe", stderr: "pipe" });
    const err = r.stderr.toString();
    expect(r.exitCode, err).toBe(0);
    expect(err).not.toMatch(/^\s+at /m);
    for (const t of ["darwin-x64", "darwin-arm64"]) expect(err).toContain(`release: skipped ${t}: another OS than this linux host`);
    if (!existsSync(join(ROOT, "dist", "shells-static", "linux-arm64", "bash")))
      expect(err).toContain("release: skipped linux-arm64: no portable shells in dist/shells-static/linux-arm64/");
    const out = mkdtempSync(join(CONF_BASE, "release-"));
    expect(run(["tar", "-xzf", join(ROOT, "dist", "release", `shellmcp-${version}-linux-x64.tar.gz`), "-C", out]).exitCode).toBe(0);
    const dir = join(out, `shellmcp-${version}-linux-x64`);
    expect(readFileSync(join(dir, "starter", "rules", "agent.rules"), "utf8")).toBe(
      readFileSync(join(ROOT, "examples", "rules", "agent.rules"), "utf8"),
    );
    expect(readFileSync(join(dir, "starter", "config.toml"), "utf8")).toContain("[shellmcp.room_writable]");
    expect(readFileSync(join(dir, "README.txt"), "utf8")).toContain("./shellmcp init claude");
    // The pages the help names relative to docs/ (src/version.ts DOCS_WHERE) are in the tarball.
    expect(readFileSync(join(dir, "docs", "approvals.md"), "utf8")).toBe(readFileSync(join(ROOT, "docs", "approvals.md"), "utf8"));
    // A named target that cannot be built: one line, status 1.
    const bad = Bun.spawnSync([BUN, join(ROOT, "build.ts"), "--release"], {
      cwd: ROOT,
      env: { ...env, SHELLMCP_RELEASE_TARGETS: "linux-x64,nowhere-x64" },
      stdout: "pipe",
      stderr: "pipe",
    });
    expect(bad.exitCode).toBe(1);
    expect(bad.stderr.toString().trim().split("\n")).toEqual([expect.stringContaining("release: unknown target nowhere-x64")]);
  }, 300_000);
});
