/**
 * The patched bash and zsh hand every execve to the wrapper with the argv contract
 *   execve(W, [W, TARGET_PATH, ORIG_ARGV0, ORIG_ARGV1, …], env)
 * and otherwise behave exactly like Debian's stock shells. Every case runs three ways: patched shell with the
 * logging stand-in wrapper, stock shell, patched shell without a wrapper; their stdout, stderr and status
 * must be identical, and the wrapper log must hold exactly the expected execs, byte for byte.
 */
import { describe, expect, test } from "bun:test";
import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { tempDir } from "../helpers/binary.ts";
import { LOG_WRAPPER, patchedShell, readWrapLog, shellsMissing, stockShell, type ShellName } from "../helpers/shells.ts";
import { skipWithout } from "../helpers/prereq.ts";

const skip = skipWithout("patched-shell suite", shellsMissing());

interface ShellRun {
  exitCode: number;
  stdout: Buffer;
  stderr: Buffer;
  log: Buffer[][];
}

const BASE_ENV = { PATH: "/usr/local/bin:/usr/bin:/bin", HOME: "/root", LC_ALL: "C" };

function runShell(
  shellPath: string,
  argv0: ShellName,
  script: string,
  env: Record<string, string | undefined> = {},
  cwd?: string,
): ShellRun {
  const dir = tempDir("shellmcp-sh-");
  const logPath = join(dir, "wrap.log");
  const fullEnv: Record<string, string> = {};
  for (const [k, v] of Object.entries({ ...BASE_ENV, WRAPLOG: logPath, ...env })) if (v !== undefined) fullEnv[k] = v;
  const r = Bun.spawnSync([shellPath, "-c", script], {
    argv0,
    env: fullEnv,
    cwd: cwd ?? dir,
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  return { exitCode: r.exitCode ?? -1, stdout: r.stdout, stderr: r.stderr, log: readWrapLog(logPath) };
}

const B = (s: string | number[]) => (typeof s === "string" ? Buffer.from(s) : Buffer.from(s));
const texts = (log: Buffer[][]) => log.map((r) => r.map((b) => b.toString()));

/** A case: a script, what the wrapper must have logged (as strings or buffers), and optional extra setup. */
interface Case {
  name: string;
  script: (ctx: { dir: string; shell: ShellName; patched: string }) => string;
  env?: (ctx: { dir: string }) => Record<string, string>;
  expectLog: (ctx: { dir: string; patched: string }) => (string | Buffer)[][] | ((log: Buffer[][]) => void);
  /** Compare against the stock shell (false for cases whose output names the patched shell's path). */
  compareStock?: boolean;
}

const CASES: Case[] = [
  { name: "simple command", script: () => "ls -d /tmp", expectLog: () => [["/usr/bin/ls", "ls", "-d", "/tmp"]] },
  {
    name: "PATH lookup of a program in a custom directory",
    script: () => "mytool one 'two words'",
    env: ({ dir }) => ({ PATH: `${dir}/bin:/usr/bin:/bin` }),
    expectLog: ({ dir }) => [[`${dir}/bin/mytool`, "mytool", "one", "two words"]],
  },
  { name: "absolute path", script: () => "/bin/echo hi", expectLog: () => [["/bin/echo", "/bin/echo", "hi"]] },
  { name: "relative path", script: () => "./bin/mytool rel", expectLog: () => [["./bin/mytool", "./bin/mytool", "rel"]] },
  { name: "exec", script: () => "exec /bin/echo x; echo not-reached", expectLog: () => [["/bin/echo", "/bin/echo", "x"]] },
  {
    name: "exec -a NAME keeps argv[0] byte for byte",
    script: () => "exec -a MY-NAME /bin/echo x",
    expectLog: () => [["/bin/echo", "MY-NAME", "x"]],
  },
  {
    name: "exec -l (argv[0] starting with a dash)",
    script: () => "exec -l /bin/echo x",
    expectLog: () => (log) => {
      expect(log.length).toBe(1);
      expect(log[0]![0]!.toString()).toBe("/bin/echo");
      expect(log[0]![1]!.toString().startsWith("-")).toBe(true);
    },
  },
  {
    name: "pipeline",
    script: () => "/bin/echo abc | /usr/bin/tr a-c x-z | cat",
    expectLog: () => (log) => {
      // Pipeline members run concurrently: order in the log is not fixed.
      expect(texts(log).sort()).toEqual(
        [
          ["/bin/echo", "/bin/echo", "abc"],
          ["/usr/bin/cat", "cat"],
          ["/usr/bin/tr", "/usr/bin/tr", "a-c", "x-z"],
        ].sort(),
      );
    },
  },
  { name: "subshell", script: () => "( /bin/echo sub )", expectLog: () => [["/bin/echo", "/bin/echo", "sub"]] },
  { name: "command substitution", script: () => 'x=$(/bin/echo cs); echo "got $x"', expectLog: () => [["/bin/echo", "/bin/echo", "cs"]] },
  {
    name: "functions and builtins are not wrapped",
    script: () => "f() { echo fn \"$@\"; }; f a; echo builtin; printf '%s\\n' pf; test 1 = 1; : ; cd /; pwd; true",
    expectLog: () => [],
  },
  { name: "command -v", script: () => "command -v ls; command -v echo", expectLog: () => [] },
  { name: "command not found: stock message and 127", script: () => 'nonexistentcmd-shellmcp; echo "rc=$?"', expectLog: () => [] },
  {
    name: "script without a shebang",
    script: () => "./noshebang.sh arg",
    expectLog: () => [["./noshebang.sh", "./noshebang.sh", "arg"]],
  },
  {
    name: "very long argv (30,000 arguments)",
    script: () => "/bin/echo {1..30000} | wc -c",
    expectLog: () => (log) => {
      const echo = log.find((r) => r[0]!.toString() === "/bin/echo")!;
      expect(echo.length).toBe(30002);
      expect(echo[2]!.toString()).toBe("1");
      expect(echo[30001]!.toString()).toBe("30000");
      expect(log.length).toBe(2);
    },
  },
  {
    name: "arguments byte for byte (blanks, empty, newline, non-UTF-8, UTF-8)",
    script: () => "/bin/echo -n 'a b' '' $'tab\\there' $'nl\\nx' $'\\xff\\xfe' é",
    expectLog: () => [[B("/bin/echo"), B("/bin/echo"), B("-n"), B("a b"), B(""), B("tab\there"), B("nl\nx"), B([0xff, 0xfe]), B("é")]],
  },
  { name: "unset wrapper variable: stock behaviour", script: () => "unset EXEC_WRAPPER; /bin/echo a", expectLog: () => [] },
  {
    name: "VAR= prefix clears it for one command",
    script: () => "EXEC_WRAPPER= /bin/echo a; /bin/echo b",
    expectLog: () => [["/bin/echo", "/bin/echo", "b"]],
  },
  {
    name: "non-exported assignment does not clear it",
    script: () => "EXEC_WRAPPER=; export -n EXEC_WRAPPER 2>/dev/null; /bin/echo a",
    expectLog: () => (log) => {
      // bash: `export -n` un-exports, so nothing is wrapped; zsh has no `export -n` (error ignored) and the
      // empty exported value disables wrapping. Either way: no wrapper call.
      expect(log).toEqual([]);
    },
    compareStock: false,
  },
  {
    name: "PATH search with missing candidates",
    script: () => 'ls -d /; nonexistentcmd-shellmcp; echo "rc=$?"',
    env: ({ dir }) => ({ PATH: `/nonexistent-a:${dir}/empty:/nonexistent-b:/usr/bin:/bin` }),
    expectLog: () => [["/usr/bin/ls", "ls", "-d", "/"]],
  },
  {
    name: "nested shell keeps intercepting",
    script: ({ patched }) => `${patched} -c '/bin/echo inner'`,
    expectLog:
      ({ patched }) =>
      (log) => {
        expect(texts(log)).toEqual([
          [patched, patched, "-c", "/bin/echo inner"],
          ["/bin/echo", "/bin/echo", "inner"],
        ]);
      },
    compareStock: false,
  },
];

function setupDir(): string {
  const dir = tempDir("shellmcp-case-");
  mkdirSync(join(dir, "bin"));
  mkdirSync(join(dir, "empty"));
  writeFileSync(join(dir, "bin", "mytool"), '#!/bin/sh\necho "mytool:$*"\n');
  chmodSync(join(dir, "bin", "mytool"), 0o755);
  writeFileSync(join(dir, "noshebang.sh"), 'echo "from-script:$1"\n');
  chmodSync(join(dir, "noshebang.sh"), 0o755);
  return dir;
}

for (const shell of ["bash", "zsh"] as const) {
  describe.skipIf(skip)(`patched ${shell}`, () => {
    const patched = patchedShell(shell);
    const stock = stockShell(shell);

    for (const c of CASES) {
      test(c.name, () => {
        const dir = setupDir();
        const env = c.env?.({ dir }) ?? {};
        const script = c.script({ dir, shell, patched });
        const wrapped = runShell(patched, shell, script, { ...env, EXEC_WRAPPER: LOG_WRAPPER }, dir);
        const expected = c.expectLog({ dir, patched });
        if (typeof expected === "function") expected(wrapped.log);
        else expect(wrapped.log).toEqual(expected.map((r) => r.map((x) => (typeof x === "string" ? Buffer.from(x) : x))));

        const plain = runShell(patched, shell, script, env, dir);
        expect(plain.log).toEqual([]);
        // Interception changes nothing the user can see.
        expect({ status: wrapped.exitCode, out: wrapped.stdout.toString("latin1"), err: wrapped.stderr.toString("latin1") }).toEqual({
          status: plain.exitCode,
          out: plain.stdout.toString("latin1"),
          err: plain.stderr.toString("latin1"),
        });
        if (c.compareStock !== false && stock !== undefined) {
          const ref = runShell(stock, shell, script, env, dir);
          expect({ status: wrapped.exitCode, out: wrapped.stdout.toString("latin1"), err: wrapped.stderr.toString("latin1") }).toEqual({
            status: ref.exitCode,
            out: ref.stdout.toString("latin1"),
            err: ref.stderr.toString("latin1"),
          });
        }
      });
    }

    test("BASH_EXEC_WRAPPER alone is honoured (0.97 compatibility)", () => {
      const r = runShell(patched, shell, "/bin/echo a", { BASH_EXEC_WRAPPER: LOG_WRAPPER });
      expect(texts(r.log)).toEqual([["/bin/echo", "/bin/echo", "a"]]);
    });

    test("EXEC_WRAPPER takes precedence over BASH_EXEC_WRAPPER", () => {
      const r = runShell(patched, shell, "/bin/echo a", { EXEC_WRAPPER: LOG_WRAPPER, BASH_EXEC_WRAPPER: "/nonexistent/other" });
      expect(r.exitCode).toBe(0);
      expect(texts(r.log)).toEqual([["/bin/echo", "/bin/echo", "a"]]);
      // EXEC_WRAPPER present but empty decides too: no wrapping, no fallback.
      const off = runShell(patched, shell, "/bin/echo a", { EXEC_WRAPPER: "", BASH_EXEC_WRAPPER: LOG_WRAPPER });
      expect(off.log).toEqual([]);
      expect(off.stdout.toString()).toBe("a\n");
    });

    test("a wrapper value starting with a blank is ignored", () => {
      const r = runShell(patched, shell, "/bin/echo a", { EXEC_WRAPPER: ` ${LOG_WRAPPER}` });
      expect(r.log).toEqual([]);
      expect(r.stdout.toString()).toBe("a\n");
    });

    test("missing wrapper: error names the wrapper, status 127, no script fallback", () => {
      const r = runShell(patched, shell, "/bin/echo a", { EXEC_WRAPPER: "/nonexistent/wrapper" });
      expect(r.exitCode).toBe(127);
      expect(r.stdout.toString()).toBe("");
      const msg = r.stderr.toString();
      expect(msg).toContain("/nonexistent/wrapper");
      expect(msg.toLowerCase()).toContain("no such file or directory");
      expect(msg).not.toContain("/bin/echo");
    });

    test("non-executable wrapper: status 126", () => {
      const dir = tempDir();
      const w = join(dir, "w");
      writeFileSync(w, "#!/bin/sh\nexit 0\n");
      chmodSync(w, 0o644);
      const r = runShell(patched, shell, "/bin/echo a", { EXEC_WRAPPER: w });
      expect(r.exitCode).toBe(126);
      expect(r.stderr.toString().toLowerCase()).toContain("permission denied");
    });

    test("a wrapper that is a shebang-less script is not run as a script", () => {
      const dir = tempDir();
      const w = join(dir, "w");
      writeFileSync(w, `echo SHOULD-NOT-RUN > ${join(dir, "ran")}\n`);
      chmodSync(w, 0o755);
      const r = runShell(patched, shell, "/bin/echo a", { EXEC_WRAPPER: w });
      expect(r.exitCode).toBe(126);
      expect(Bun.file(join(dir, "ran")).size).toBe(0);
    });
  });
}
