/**
 * The npm launcher (`npm/shellmcp/bin/shellmcp.js`, issue 25) with the real Node.js: it runs the platform
 * package's executable with the arguments, stdio and exit status passed through (an MCP session through it), says
 * what to do when npm left the platform package out, and its package names the repository's version throughout.
 */
import { describe, expect, test } from "bun:test";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { releaseVersion } from "../../scripts/release.ts";
import { ensureBinary, ROOT, run } from "../helpers/binary.ts";
import { startServe } from "../helpers/mcp.ts";
import { skipWithout, toolMissing } from "../helpers/prereq.ts";
import { CONF_BASE } from "../helpers/test-dirs.ts";

const LAUNCHER = join(ROOT, "npm", "shellmcp", "bin", "shellmcp.js");

describe.skipIf(skipWithout("npm launcher", toolMissing("node", "npm")))("npm launcher", () => {
  test("runs the executable: arguments, output and exit status pass through", () => {
    const v = run(["node", LAUNCHER, "--version"], { env: { PATH: process.env.PATH, SHELLMCP_BINARY: ensureBinary() } });
    expect(v.stdout.trim()).toBe(releaseVersion());
    const status = run(["node", LAUNCHER, "-c", "echo out; echo err >&2; exit 7"], {
      env: { PATH: process.env.PATH, SHELLMCP_BINARY: "/bin/sh" },
    });
    expect(status).toEqual({ exitCode: 7, stdout: "out\n", stderr: "err\n" });
  });

  test("an MCP session through the launcher", async () => {
    const s = await startServe({ command: ["node", LAUNCHER], env: { SHELLMCP_BINARY: ensureBinary() } });
    try {
      const tools = await s.client.listTools();
      expect(tools.tools.map((t) => t.name)).toEqual(["shell", "exec_command", "write_stdin", "list_sessions"]);
      const r = await s.shell({ command: "echo through the launcher", workdir: CONF_BASE, login: false });
      expect(r.out.output).toBe("through the launcher\n");
    } finally {
      await s.close();
    }
  });

  test("without its platform package it says how to fix it", () => {
    const dir = mkdtempSync(join(CONF_BASE, "launcher-"));
    mkdirSync(join(dir, "bin"));
    copyFileSync(LAUNCHER, join(dir, "bin", "shellmcp.js"));
    const r = run(["node", join(dir, "bin", "shellmcp.js"), "serve"], { env: { PATH: process.env.PATH } });
    expect(r.exitCode).toBe(1);
    expect(r.stderr).toContain(`the package @shellmcp/${process.platform}-${process.arch}`);
    expect(r.stderr).toContain("is not installed");
  });

  test("macOS without the patched shells: the launcher says how to build them, before anything starts", () => {
    const dir = mkdtempSync(join(CONF_BASE, "launcher-mac-"));
    const asMac = join(dir, "as-mac.cjs");
    writeFileSync(asMac, 'Object.defineProperty(process, "platform", { value: "darwin" });\n');
    const env = { PATH: process.env.PATH, SHELLMCP_BINARY: "/bin/false" };
    const r = run(["node", "-r", asMac, LAUNCHER, "serve"], { env });
    expect(r.exitCode).toBe(1);
    expect(r.stderr).toContain("the patched shells are missing");
    expect(r.stderr).toContain("bash scripts/build-shells-macos.sh");
    expect(r.stderr).toContain("SHELLMCP_SHELLS_DIR=<clone>/dist/shells npx -y shellmcp serve");
    // With the shells named, it starts the executable (here /bin/false: status 1, nothing said).
    writeFileSync(join(dir, "bash"), "");
    const ok = run(["node", "-r", asMac, LAUNCHER, "serve"], { env: { ...env, SHELLMCP_SHELLS_DIR: dir } });
    expect(ok).toEqual({ exitCode: 1, stdout: "", stderr: "" });
  });

  test("npm pack of the launcher: the files, the version, one optional dependency per platform", () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, "npm", "shellmcp", "package.json"), "utf8"));
    expect(pkg.version).toBe(releaseVersion());
    expect(Object.keys(pkg.optionalDependencies).sort()).toEqual([
      "@shellmcp/darwin-arm64",
      "@shellmcp/darwin-x64",
      "@shellmcp/linux-arm64",
      "@shellmcp/linux-x64",
    ]);
    const r = run(["npm", "pack", "--dry-run", "--json", "--cache", join(ROOT, ".cache", "npm"), join(ROOT, "npm", "shellmcp")], {
      cwd: CONF_BASE,
      env: { PATH: process.env.PATH, HOME: CONF_BASE },
    });
    expect(r.exitCode, r.stderr).toBe(0);
    const [packed] = JSON.parse(r.stdout) as { name: string; version: string; files: { path: string; mode: number }[] }[];
    expect(packed!.name).toBe("shellmcp");
    expect(packed!.files.map((f) => f.path).sort()).toEqual(["bin/shellmcp.js", "package.json"]);
    expect(packed!.files.find((f) => f.path === "bin/shellmcp.js")!.mode & 0o111).not.toBe(0);
  });
});
