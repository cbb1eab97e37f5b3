/**
 * The C parts under AddressSanitizer and UndefinedBehaviorSanitizer (scripts/build-sanitized.sh): the room
 * launcher's tests and the mutation test of its decoder run against a sanitized launcher (built here: a second),
 * sandbox-exec's tests (malformed plans, the mutation sweep) against a sanitized sandbox-exec,
 * and the in-shell escalation client's tests (patches/escalate-client.c inside bash and zsh: the differential test
 * and the cross-compatibility test) against sanitized shells when `scripts/build-sanitized.sh --shells` has built
 * them (a few minutes; skipped with the reason otherwise). Each runs as its own `bun test` with the build named by
 * `SHELLMCP_TEST_ROOM_LAUNCHER` / `SHELLMCP_TEST_SHELLS_DIR`; a sanitizer report stops the program (the builds do
 * not recover), which fails those tests, and the report itself is looked for in their output.
 */
import { describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "../helpers/binary.ts";
import { skipWithout } from "../helpers/prereq.ts";

const OUT = process.env.SHELLMCP_SANITIZED_DIR ?? join(ROOT, ".cache", "sanitized");
const gcc = Bun.which("gcc");
const skip = skipWithout("sanitized builds", process.platform !== "linux" ? "not Linux" : gcc === null ? "gcc not installed" : undefined);

/** Run `bun test files` with `env` added; its combined output and exit status. */
function bunTest(files: string[], env: Record<string, string>): { code: number; out: string } {
  const r = Bun.spawnSync([process.execPath, "test", "--timeout", "300000", ...files], {
    cwd: ROOT,
    env: {
      ...process.env,
      ...env,
      ASAN_OPTIONS: "detect_leaks=0:exitcode=66:allow_user_segv_handler=1",
      UBSAN_OPTIONS: "print_stacktrace=1:halt_on_error=1",
    },
    stdout: "pipe",
    stderr: "pipe",
  });
  return { code: r.exitCode ?? -1, out: r.stdout.toString() + r.stderr.toString() };
}

const REPORT = /ERROR: AddressSanitizer|runtime error:|ERROR: LeakSanitizer/;

describe.skipIf(skip)("ASan/UBSan builds of the C parts", () => {
  test("the room launcher's tests and the mutation test pass against the sanitized launcher", () => {
    const b = Bun.spawnSync(["bash", join(ROOT, "scripts", "build-sanitized.sh")], {
      cwd: ROOT,
      env: { ...process.env, SHELLMCP_SANITIZED_DIR: OUT },
    });
    expect(b.exitCode).toBe(0);
    const launcher = join(OUT, "room-launcher");
    expect(Bun.spawnSync(["ldd", launcher]).stdout.toString()).toContain("libasan");
    const r = bunTest(["test/sandbox/room-launcher.test.ts", "test/sandbox/room-launcher-mutation.test.ts"], {
      SHELLMCP_TEST_ROOM_LAUNCHER: launcher,
    });
    expect(r.out).not.toMatch(REPORT);
    expect(r.out).toMatch(/\b0 fail\b/);
    expect(r.code).toBe(0);
  }, 600_000);

  test("sandbox-exec's tests, with its malformed plans and mutation sweep, pass against the sanitized build", () => {
    const b = Bun.spawnSync(["bash", join(ROOT, "scripts", "build-sanitized.sh")], {
      cwd: ROOT,
      env: { ...process.env, SHELLMCP_SANITIZED_DIR: OUT },
    });
    expect(b.exitCode).toBe(0);
    const exec = join(OUT, "sandbox-exec");
    expect(Bun.spawnSync(["ldd", exec]).stdout.toString()).toContain("libasan");
    const r = bunTest(["test/sandbox/sandbox-exec.test.ts"], { SHELLMCP_TEST_SANDBOX_EXEC: exec });
    expect(r.out).not.toMatch(REPORT);
    expect(r.out).toMatch(/\b0 fail\b/);
    expect(r.code).toBe(0);
  }, 600_000);

  const shells = existsSync(join(OUT, "bash")) && existsSync(join(OUT, "zsh"));
  test.skipIf(!shells)(
    "the in-shell client's tests pass in the sanitized shells (scripts/build-sanitized.sh --shells)",
    () => {
      expect(Bun.spawnSync(["ldd", join(OUT, "bash")]).stdout.toString()).toContain("libasan");
      const r = bunTest(["test/escalate/in-shell-client.test.ts", "test/escalate/cross-compat.test.ts"], { SHELLMCP_TEST_SHELLS_DIR: OUT });
      expect(r.out).not.toMatch(REPORT);
      expect(r.out).toMatch(/\b0 fail\b/);
      expect(r.code).toBe(0);
    },
    900_000,
  );
});
