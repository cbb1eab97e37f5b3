/**
 * A bubblewrap plan too large to start is refused before anything runs, with the counts, the limit and what to do
 * (src/sandbox/linux/exec-limits.ts), as the `shell` tool's result: through the compiled `serve`, the real bwrap and
 * kernel, and an MCP client.
 *
 * Before: 3,000 writable roots made bwrap stop with "bwrap: Exceeded maximum number of arguments 9000", which the
 * server took for bubblewrap failing after its preflight (it forgot the preflight and said the next call might run
 * under Landlock); 1,200 roots under `ulimit -s 256` (the kernel's 128 KiB) made the call fail with no tool result at
 * all, a JSON-RPC internal error "cannot start …/room-launcher: E2BIG: argument list too long"; `sandbox linux` with
 * 2,000 roots said only "cannot start the sandbox helper: E2BIG: argument list too long, posix_spawn
 * '/proc/self/exe'" (its policy JSON, one argument, is over 128 KiB).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { join } from "node:path";
import { BINARY, ensureBinary } from "../helpers/binary.ts";
import { startServe, type Session } from "../helpers/mcp.ts";
import { bwrapMissing } from "../helpers/sandbox-run.ts";
import { skipWithout } from "../helpers/prereq.ts";
import { CONF_BASE } from "../helpers/test-dirs.ts";

const skip = skipWithout("bubblewrap argv limit suite", bwrapMissing);
mkdirSync(CONF_BASE, { recursive: true });
const base = mkdtempSync(join(CONF_BASE, "bwrap-argv-limit-"));
const sessions: Session[] = [];
afterAll(async () => {
  for (const s of sessions) await s.close().catch(() => {});
  rmSync(base, { recursive: true, force: true });
});

/** `n` fresh folders to be writable roots (paths of over 80 bytes: three arguments and ~170 bytes of bwrap argv each). */
function roots(n: number): string[] {
  const dir = join(base, `roots-${n}`);
  const out = Array.from({ length: n }, (_, i) => join(dir, `writable-root-with-a-long-name-${String(i).padStart(5, "0")}`));
  for (const r of out) mkdirSync(r, { recursive: true });
  return out;
}

/** A `serve` on bubblewrap (under `ulimit -s stack` KiB when given) whose workspace-write policy has `n` extra roots. */
async function serveWith(n: number, stack?: number): Promise<{ s: Session; ws: string }> {
  const ws = mkdtempSync(join(base, "ws-"));
  const bin = ensureBinary();
  const command = stack === undefined ? [bin] : ["/bin/sh", "-c", `ulimit -s ${stack} && exec "$0" "$@"`, bin];
  const s = await startServe({ command, codexHome: mkdtempSync(join(base, "home-")), args: ["--sandbox-backend", "bwrap"] });
  sessions.push(s);
  await s.sandboxState({ type: "workspace-write", writable_roots: roots(n), network_access: false, exclude_slash_tmp: true }, ws);
  return { s, ws };
}

describe.skipIf(skip)("a bubblewrap argv over a limit", () => {
  test("more than bwrap's 9,000 arguments: refused with the counts, nothing run, the next call still under bwrap", async () => {
    const { s, ws } = await serveWith(3000);
    const r = await s.shell({ command: "touch ran", workdir: ws, login: false });
    expect(r.isError).toBe(true);
    expect(r.out.exit_code).toBe(101);
    expect(r.out.output).toMatch(
      /^shellmcp: the bubblewrap command for this sandbox is too large to start: its \d+ mounts \(3001 writable roots, 0 denied paths\) make \d+ arguments of \d+ bytes, more than the 9000 arguments bubblewrap accepts after its name/,
    );
    expect(r.out.output).toContain("Nothing was run: use fewer writable roots (--add-dir, writable_roots) or denied paths");
    expect(r.out.output).not.toContain("preflight");
    expect(existsSync(join(ws, "ran"))).toBe(false);
    // The refusal is the plan's, not bubblewrap failing: the next, smaller call runs under bubblewrap as before.
    await s.sandboxState({ type: "workspace-write", writable_roots: [], network_access: false, exclude_slash_tmp: true }, ws);
    const ok = await s.shell({ command: "touch ran && echo ran", workdir: ws, login: false });
    expect(ok.out.output).toBe("ran\n");
    expect(s.stderr()).not.toContain("Landlock");
  }, 60_000);

  test("more bytes than the kernel takes under `ulimit -s 256` (128 KiB): refused as E2BIG would be, with the fix", async () => {
    const { s, ws } = await serveWith(1200, 256);
    const r = await s.shell({ command: "touch ran", workdir: ws, login: false });
    expect(r.isError).toBe(true);
    expect(r.out.exit_code).toBe(101);
    expect(r.out.output).toContain("(1201 writable roots, 0 denied paths)");
    expect(r.out.output).toMatch(
      /more than the kernel takes in one execve \(131072 bytes: a quarter of the stack limit of 262144 bytes, at least 128 KiB, at most 6 MiB; execve would fail with E2BIG\)/,
    );
    expect(r.out.output).toContain("or raise the stack limit (ulimit -s)");
    expect(existsSync(join(ws, "ran"))).toBe(false);
  }, 60_000);

  test("`sandbox linux` whose policy JSON is one argument over 128 KiB: refused with the counts, nothing run", () => {
    const ws = mkdtempSync(join(base, "ws-"));
    ensureBinary();
    const addDirs = roots(2000).flatMap((r) => ["--add-dir", r]);
    const home = mkdtempSync(join(base, "home-"));
    const r = Bun.spawnSync(
      [BINARY, "sandbox", "linux", "--backend", "bwrap", "--sandbox", "workspace-write", ...addDirs, "--", "touch", "ran"],
      {
        cwd: ws,
        env: { PATH: "/usr/bin:/bin", HOME: home, CODEX_HOME: home },
        stdout: "pipe",
        stderr: "pipe",
      },
    );
    const err = r.stderr.toString();
    expect(r.exitCode).toBe(101);
    expect(err).toMatch(
      /^shellmcp: the sandbox helper's command line for this sandbox is too large to start: its policy's 200\d writable roots and 0 denied paths make \d+ arguments of \d+ bytes, and one of its strings \(\{"type":"workspace-write",.*\) is \d+ bytes, more than the kernel takes in one argument \(MAX_ARG_STRLEN: 131072 bytes with its NUL; execve would fail with E2BIG\)\. Nothing was run: use fewer writable roots/,
    );
    expect(existsSync(join(ws, "ran"))).toBe(false);
  }, 60_000);
});
