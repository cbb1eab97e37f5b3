/**
 * Plays every sandbox conformance vector (test/fixtures/sandbox/vectors.json, vendored from the project's shared
 * spec; see test/fixtures/README.md) against both Linux backends through the compiled binary (as
 * `codex-linux-sandbox`, or `shellmcp sandbox linux` for spawner-level vectors), the way docs/sandbox.md describes: fresh $CWD (not under /tmp), $OUTSIDE, $EXTRA, $HOST_TMP; `cwd_setup` on the host;
 * `expect` merged with `by_backend`; host checks afterwards. Vectors where shellmcp deliberately differs are
 * listed in DEVIATIONS (and in the README) with the reason.
 */
import { CONF_BASE } from "../helpers/cleanup.ts";
import { describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { binaryAs, ensureBinary, ROOT } from "../helpers/binary.ts";
import { skipWithout, toolMissing } from "../helpers/prereq.ts";

const VECTORS = join(ROOT, "test", "fixtures", "sandbox", "vectors.json");

interface Expect {
  exit?: number | "nonzero";
  stdout_contains?: string;
  stdout_not_contains?: string;
  stderr_contains_any?: string[];
  host_check?: string;
  host_check_for?: Record<string, string>;
  backends?: string[];
  by_backend?: Record<string, Expect>;
  level?: string;
  harness?: string;
}
interface Vector {
  name: string;
  policy: unknown;
  cwd_setup: string[];
  command: string[];
  expect: Expect;
  helper_env?: Record<string, string>;
}

const vectors: Vector[] = JSON.parse(readFileSync(VECTORS, "utf8"));

/** Where shellmcp deliberately differs from the vector's expectation, per backend: the expectation we hold instead. */
const DEVIATIONS: Record<string, Partial<Record<"landlock" | "bwrap", { expect: Expect; why: string }>>> = {
  dev_shm_and_multiprocessing: {
    landlock: {
      expect: { exit: 0, stdout_contains: "lock-ok" },
      why: "the Landlock backend grants /dev/shm so Python multiprocessing works (Codex 0.99 denied it)",
    },
  },
  // issue 34, item 5: under bubblewrap the `.git` of every repository below a writable root's top is read-only too.
  ww_nested_dot_git_not_protected: {
    bwrap: {
      expect: {
        exit: "nonzero",
        stdout_contains: undefined,
        stderr_contains_any: ["Read-only file system"],
        host_check: "! test -s sub/.git/config",
      },
      why: "nested repositories keep a read-only .git under bubblewrap (Codex protects only top-level names)",
    },
  },
  // issue 11: libc's send() is sendto(…, NULL, 0); the filter allows sendto without an address (Codex denies all).
  net_socketpair_ok_send_denied_write_ok: {
    landlock: {
      expect: { exit: 0, stdout_contains: "send-ok" },
      why: "send() on a connected AF_UNIX socketpair is allowed (sendto with a NULL address)",
    },
    bwrap: {
      expect: { exit: 0, stdout_contains: "send-ok" },
      why: "send() on a connected AF_UNIX socketpair is allowed (sendto with a NULL address)",
    },
  },
};

const bwrapUsable = Bun.spawnSync(["bwrap", "--ro-bind", "/", "/", "--unshare-user", "--unshare-pid", "--", "/bin/true"]).exitCode === 0;
const needs = (v: Vector): string | undefined => {
  const text = JSON.stringify([v.command, v.cwd_setup, v.expect]);
  return toolMissing(...["python3", "git", "strace"].filter((t) => text.includes(t)));
};

function sh(script: string, env: Record<string, string>, cwd: string): { code: number; out: string } {
  const r = Bun.spawnSync(["bash", "-c", script], { env: { ...process.env, ...env }, cwd, stdout: "pipe", stderr: "pipe" });
  return { code: r.exitCode ?? -1, out: r.stdout.toString() + r.stderr.toString() };
}

function runVector(v: Vector, backend: "landlock" | "bwrap") {
  const base = CONF_BASE;
  mkdirSync(base, { recursive: true });
  const box = mkdtempSync(join(base, "v-"));
  const env = {
    CWD: join(box, "cwd"),
    OUTSIDE: join(box, "outside"),
    EXTRA: join(box, "extra"),
    HOST_TMP: `/tmp/shellmcp-conf-${box.slice(-6)}-${backend}`,
  };
  for (const d of [env.CWD, env.OUTSIDE, env.EXTRA]) mkdirSync(d);
  const subst = (s: string) =>
    s.replaceAll("$CWD", env.CWD).replaceAll("$OUTSIDE", env.OUTSIDE).replaceAll("$EXTRA", env.EXTRA).replaceAll("$HOST_TMP", env.HOST_TMP);
  for (const line of v.cwd_setup) {
    const r = sh(line, env, env.CWD);
    if (r.code !== 0) throw new Error(`cwd_setup failed: ${line}: ${r.out}`);
  }
  const policy = JSON.parse(subst(JSON.stringify(v.policy)));
  const command = v.command.map(subst);
  // A deviation replaces the vector's per-backend expectation as a whole.
  const exp: Expect = { ...v.expect, ...(DEVIATIONS[v.name]?.[backend]?.expect ?? v.expect.by_backend?.[backend] ?? {}) };
  const childEnv: Record<string, string> = {
    PATH: "/usr/local/bin:/usr/bin:/bin",
    HOME: homedir(),
    LC_ALL: "C",
    ...env,
    ...(v.helper_env ? JSON.parse(subst(JSON.stringify(v.helper_env))) : {}),
  };
  let argv: string[];
  if (exp.level === "spawner") {
    argv = [ensureBinary(), "sandbox", "linux", "--backend", backend, "--policy", JSON.stringify(policy), "--", ...command];
  } else {
    argv = [
      binaryAs("codex-linux-sandbox"),
      "--backend",
      backend,
      "--sandbox-policy-cwd",
      env.CWD,
      "--sandbox-policy",
      JSON.stringify(policy),
      "--",
      ...command,
    ];
  }
  if (v.expect.harness?.includes("error=ENOSYS"))
    argv = [
      "strace",
      "-f",
      "-o",
      "/dev/null",
      "-e",
      "trace=landlock_create_ruleset",
      "-e",
      "inject=landlock_create_ruleset:error=ENOSYS",
      ...argv,
    ];
  if (v.expect.harness?.includes("retval=1"))
    argv = [
      "strace",
      "-f",
      "-o",
      "/dev/null",
      "-e",
      "trace=landlock_create_ruleset",
      "-e",
      "inject=landlock_create_ruleset:retval=1:when=1",
      ...argv,
    ];
  const r = Bun.spawnSync(argv, { env: childEnv, cwd: env.CWD, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  const out = r.stdout.toString();
  const err = r.stderr.toString();
  const ctx = `\n--- stdout\n${out}\n--- stderr\n${err}`;
  const code = r.exitCode ?? (r.signalCode ? 128 : -1);
  if (exp.exit === "nonzero") expect(code, `exit status${ctx}`).not.toBe(0);
  else if (exp.exit !== undefined) expect(code, `exit status${ctx}`).toBe(exp.exit);
  if (exp.stdout_contains !== undefined) expect(out, ctx).toContain(exp.stdout_contains);
  if (exp.stdout_not_contains !== undefined) expect(out, ctx).not.toContain(exp.stdout_not_contains);
  if (exp.stderr_contains_any !== undefined)
    expect(
      exp.stderr_contains_any.some((s) => err.includes(s) || out.includes(s)),
      `stderr should contain one of ${JSON.stringify(exp.stderr_contains_any)}${ctx}`,
    ).toBe(true);
  for (const check of [exp.host_check, v.expect.host_check_for?.[backend]]) {
    if (check === undefined) continue;
    const h = sh(check, env, env.CWD);
    expect(h.code, `host check failed: ${check}\n${h.out}${ctx}`).toBe(0);
  }
  rmSync(box, { recursive: true, force: true });
  rmSync(env.HOST_TMP, { force: true });
}

/** Per vector: some run strace or several sandboxed commands, slow when both cores are busy (bun's default is 5 s). */
const VECTOR_TIMEOUT_MS = 30_000;

for (const backend of ["landlock", "bwrap"] as const) {
  const skip =
    process.platform !== "linux" ||
    (backend === "bwrap" && skipWithout("sandbox vectors, bwrap backend", bwrapUsable ? undefined : "bubblewrap missing or unusable here"));
  describe.skipIf(skip)(`sandbox vectors, ${backend} backend`, () => {
    // A vector written for the other backend only (e.g. .git protection, which Landlock cannot give) is not a
    // test of this one: it is left out rather than reported as skipped.
    for (const v of vectors.filter((v) => v.expect.backends?.includes(backend) ?? true)) {
      const missing = needs(v);
      const why = skipWithout(`sandbox vector ${v.name} (${backend})`, missing) ? missing : undefined;
      test.skipIf(why !== undefined)(
        `${v.name}${why !== undefined ? ` (skipped: ${why})` : ""}`,
        () => runVector(v, backend),
        VECTOR_TIMEOUT_MS,
      );
    }
  });
}

export { DEVIATIONS };
