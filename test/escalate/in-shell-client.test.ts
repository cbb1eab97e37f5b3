/**
 * Differential test of the in-shell escalation client (patches/escalate-client.c, compiled into the patched bash
 * and zsh) against the `codex-execve-wrapper` role of the compiled binary: the same script runs twice in the same
 * patched shell, once with `SHELLMCP_INTERCEPT=*` (every exec decided in the shell, by the C client) and once
 * without it (every exec handed to the wrapper). A raw server records every request frame and gives both runs the
 * same scripted answers. The request payloads must be identical byte for byte (non-UTF-8 argv and env, huge env,
 * `exec -a`, `exec -l`, relative paths, integer-like variable names, control characters), and so must the
 * outcomes (status, stdout, stderr) for Run, Deny and Escalate; protocol failures must fail closed in both.
 */
import { describe, expect, test } from "bun:test";
import { chmodSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { tempDir } from "../helpers/binary.ts";
import { ourWrapper } from "../helpers/escalation.ts";
import { patchedShell, shellsMissing, type ShellName } from "../helpers/shells.ts";
import { runCaptured, type CapturedRun, type Reply } from "./capture-server.ts";

const missing = shellsMissing();
if (missing !== undefined) console.warn(`SKIP in-shell client suite: ${missing}`);

const BASE_ENV = { PATH: "/usr/local/bin:/usr/bin:/bin", HOME: "/root", LC_ALL: "C" };
const BIG = "x".repeat(100_000);

interface Case {
  name: string;
  script: string;
  env?: Record<string, string>;
  /** Run the patched shell under `env -i`-style raw bytes: extra NUL-free byte strings prepended via /usr/bin/env. */
  rawEnv?: string[];
  reply?: (request: Buffer, index: number) => Reply;
  /** Compare stderr too (false for failure cases, whose wording differs). */
  sameStderr?: boolean;
  check?: (r: CapturedRun) => void;
}

const run: () => Reply = () => ({ kind: "Run" });

const CASES: Case[] = [
  { name: "absolute path, Run", script: "/bin/echo hi", check: (r) => expect(r.stdout.toString()).toBe("hi\n") },
  { name: "PATH lookup and several execs", script: "printenv FOO; /bin/echo two; ls -d /", env: { FOO: 'a"b\\c' } },
  { name: "relative path", script: "./bin/tool rel 'a b'", check: (r) => expect(r.stdout.toString()).toBe("tool:rel a b\n") },
  { name: "path with dot-dot", script: "bin/../bin/tool x" },
  { name: "exec -a", script: "exec -a MY-NAME /bin/echo x" },
  { name: "exec -l", script: "exec -l /bin/echo x" },
  {
    name: "non-UTF-8, control characters and quotes in argv",
    script:
      "/bin/echo $'\\xff\\xfe' $'\\xe2\\x82' $'\\xed\\xa0\\x80' $'\\xf0\\x9f\\x98' $'a\"b\\\\c\\x01\\x1f\\x7f\\t\\n\\r\\b\\f' é '' > out; od -c out",
  },
  { name: "non-UTF-8 value exported by the script", script: "export V=$'a\\xffb\\xc0\\xaf'; /bin/true" },
  {
    name: "non-UTF-8 names and values in the inherited environment",
    script: "/bin/true",
    rawEnv: ["X\\xffY=1", "GOOD=\\xe2\\x82\\xac\\xe2\\x82", "Z=\\xf4\\x90\\x80\\x80"],
  },
  {
    name: "integer-like variable names are ordered as JavaScript does",
    script: "/bin/true",
    rawEnv: ["9=nine", "10=ten", "01=zero-one", "4294967294=max", "4294967295=over", "0=zero"],
  },
  {
    name: "huge environment",
    script: "/bin/true",
    env: Object.fromEntries([["BIG", BIG], ...Array.from({ length: 2000 }, (_, i) => [`V_${i}`, `value-${i}`])]),
  },
  {
    name: "Deny with a reason",
    script: "/bin/echo a; echo after=$?",
    reply: () => ({ kind: "Deny", reason: 'no "way" ü \u2028 \\' }),
    check: (r) => expect(r.stderr.toString()).toBe('Execution denied: no "way" ü \u2028 \\\n'),
  },
  {
    name: "Deny without a reason",
    script: "/bin/echo a; echo after=$?",
    reply: () => ({ kind: "Deny", reason: null }),
    check: (r) => expect(r.stdout.toString()).toBe("after=1\n"),
  },
  {
    name: "exec builtin denied ends the shell with status 1",
    script: "exec /bin/echo a; echo not-reached",
    reply: () => ({ kind: "Deny", reason: "x" }),
    check: (r) => expect(r.exitCode).toBe(1),
  },
  {
    name: "Escalate passes fds 0-2 and exits with the result",
    script: "/bin/echo a; echo rc=$?",
    reply: () => ({ kind: "Escalate", exitCode: 7, write: "escalated\n" }),
    check: (r) => {
      expect(r.stdout.toString()).toBe("escalated\nrc=7\n");
      expect(r.exchanges[0]!.fds).toEqual([0, 1, 2]);
    },
  },
  {
    name: "Escalate with stdout closed",
    script: "/bin/echo a >&-; echo rc=$?",
    reply: () => ({ kind: "Escalate", exitCode: 300 }),
    check: (r) => expect(r.exchanges[0]!.fds).toEqual([0, 1, 2]),
  },
  {
    name: "Escalate with stdin closed",
    script: "/bin/echo a <&-; echo rc=$?",
    reply: () => ({ kind: "Escalate", exitCode: 3 }),
    check: (r) => expect(r.exchanges[0]!.fds).toEqual([0, 1, 2]),
  },
  {
    name: "Escalate with a negative exit code",
    script: "/bin/echo a; echo rc=$?",
    reply: () => ({ kind: "Escalate", exitCode: -1 }),
    check: (r) => expect(r.stdout.toString()).toBe("rc=255\n"),
  },
  {
    name: "mixed answers",
    script: "/bin/echo 1; /bin/echo 2; /bin/echo 3; echo done",
    reply: (_, i) => [run(), { kind: "Deny", reason: "two" } as Reply, { kind: "Escalate", exitCode: 0, write: "three\n" } as Reply][i]!,
  },
  { name: "script without a shebang, Run", script: "./noshebang.sh arg" },
  {
    name: "garbage response fails closed",
    script: "/bin/echo a; echo rc=$?",
    reply: () => ({ kind: "raw", payload: Buffer.from("garbage") }),
    sameStderr: false,
    check: (r) => expect(r.stdout.toString()).toBe("rc=1\n"),
  },
  {
    name: "unknown action fails closed",
    script: "/bin/echo a; echo rc=$?",
    reply: () => ({ kind: "raw", payload: Buffer.from('{"action":"Maybe"}') }),
    sameStderr: false,
    check: (r) => expect(r.stdout.toString()).toBe("rc=1\n"),
  },
  {
    name: "server hangs up fails closed",
    script: "/bin/echo a; echo rc=$?",
    reply: () => ({ kind: "hangup" }),
    sameStderr: false,
    check: (r) => expect(r.stdout.toString()).toBe("rc=1\n"),
  },
  {
    name: "unknown fields and whitespace are accepted",
    script: "/bin/echo a",
    reply: () => ({
      kind: "raw",
      payload: Buffer.from(' { "x" : [1, {"y": null}], "action" : { "Deny" : { "reason" : "r\\u00fc\\ud83d\\ude00", "z": 1 } } } '),
    }),
    check: (r) => expect(r.stderr.toString()).toBe("Execution denied: rü😀\n"),
  },
];

function setupDir(): string {
  const dir = tempDir("shellmcp-client-");
  mkdirSync(join(dir, "bin"));
  writeFileSync(join(dir, "bin", "tool"), '#!/bin/sh\necho "tool:$*"\n');
  chmodSync(join(dir, "bin", "tool"), 0o755);
  writeFileSync(join(dir, "noshebang.sh"), 'echo "from-script:$1"\n');
  chmodSync(join(dir, "noshebang.sh"), 0o755);
  return dir;
}

function argvFor(shell: ShellName, c: Case): string[] {
  if (c.rawEnv === undefined) return [patchedShell(shell), "-c", c.script];
  // Bun passes only UTF-8 strings: let a stock bash build the raw bytes, then exec the patched shell.
  const q = (s: string) => `'${s.replace(/'/g, "'\\''")}'`;
  const entries = c.rawEnv.map((e) => `$'${e}'`).join(" ");
  return ["/bin/bash", "-c", `exec /usr/bin/env ${entries} ${q(patchedShell(shell))} -c ${q(c.script)}`];
}

for (const shell of ["bash", "zsh"] as const) {
  describe.skipIf(missing !== undefined)(`in-shell client vs wrapper (${shell})`, () => {
    for (const c of CASES) {
      test(c.name, async () => {
        const dir = setupDir();
        const wrapper = ourWrapper();
        const env = { ...BASE_ENV, ...c.env, EXEC_WRAPPER: wrapper, BASH_EXEC_WRAPPER: wrapper };
        const reply = c.reply ?? run;
        const viaWrapper = await runCaptured(argvFor(shell, c), env, reply, dir);
        const inShell = await runCaptured(argvFor(shell, c), { ...env, SHELLMCP_INTERCEPT: "*" }, reply, dir);
        expect(inShell.exchanges.length).toBeGreaterThan(0);
        expect(inShell.exchanges.length).toBe(viaWrapper.exchanges.length);
        for (let i = 0; i < inShell.exchanges.length; i++) {
          const a = inShell.exchanges[i]!.request;
          const b = viaWrapper.exchanges[i]!.request;
          if (!a.equals(b)) expect(a.toString("latin1")).toBe(b.toString("latin1")); // readable diff
          expect(inShell.exchanges[i]!.fds).toEqual(viaWrapper.exchanges[i]!.fds);
        }
        expect(inShell.exitCode).toBe(viaWrapper.exitCode);
        expect(inShell.stdout.toString("latin1")).toBe(viaWrapper.stdout.toString("latin1"));
        if (c.sameStderr !== false) expect(inShell.stderr.toString("latin1")).toBe(viaWrapper.stderr.toString("latin1"));
        else {
          expect(inShell.stderr.toString()).toStartWith("Error: ");
          expect(viaWrapper.stderr.toString()).toStartWith("Error: ");
        }
        c.check?.(inShell);
      });
    }

    test("the request never carries the protocol variables or SHELLMCP_INTERCEPT", async () => {
      const wrapper = ourWrapper();
      const r = await runCaptured(
        [patchedShell(shell), "-c", "/bin/true"],
        { ...BASE_ENV, EXEC_WRAPPER: wrapper, BASH_EXEC_WRAPPER: wrapper, SHELLMCP_INTERCEPT: "*" },
        run,
      );
      const env = JSON.parse(r.exchanges[0]!.request.toString()).env;
      for (const k of ["CODEX_ESCALATE_SOCKET", "EXEC_WRAPPER", "BASH_EXEC_WRAPPER", "SHELLMCP_INTERCEPT"]) expect(env[k]).toBeUndefined();
      expect(env.PATH).toBe(BASE_ENV.PATH);
    });

    test("without CODEX_ESCALATE_SOCKET the client fails closed like the wrapper", () => {
      const wrapper = ourWrapper();
      const env = { ...BASE_ENV, EXEC_WRAPPER: wrapper, BASH_EXEC_WRAPPER: wrapper };
      const a = Bun.spawnSync([patchedShell(shell), "-c", "/bin/echo a; echo rc=$?"], { env: { ...env, SHELLMCP_INTERCEPT: "*" } });
      const b = Bun.spawnSync([patchedShell(shell), "-c", "/bin/echo a; echo rc=$?"], { env });
      expect(a.stdout.toString()).toBe("rc=1\n");
      expect(a.stdout.toString()).toBe(b.stdout.toString());
      expect(a.stderr.toString()).toBe(b.stderr.toString());
      const bad = Bun.spawnSync([patchedShell(shell), "-c", "/bin/echo a; echo rc=$?"], {
        env: { ...env, SHELLMCP_INTERCEPT: "*", CODEX_ESCALATE_SOCKET: "3x" },
      });
      const badW = Bun.spawnSync([patchedShell(shell), "-c", "/bin/echo a; echo rc=$?"], { env: { ...env, CODEX_ESCALATE_SOCKET: "3x" } });
      expect(bad.stdout.toString()).toBe("rc=1\n");
      expect(bad.stderr.toString()).toBe(badW.stderr.toString());
    });

    test("Run resets signal dispositions and the mask, as the wrapper does", async () => {
      const wrapper = ourWrapper();
      const env = { ...BASE_ENV, EXEC_WRAPPER: wrapper, BASH_EXEC_WRAPPER: wrapper };
      // The shell ignores SIGINT/SIGQUIT for background jobs and may block signals; the program must see defaults.
      const script = "trap '' TERM; /bin/grep -E '^Sig(Blk|Ign)' /proc/self/status & wait";
      const a = await runCaptured([patchedShell(shell), "-c", script], { ...env, SHELLMCP_INTERCEPT: "*" }, run);
      const b = await runCaptured([patchedShell(shell), "-c", script], env, run);
      expect(a.stdout.toString()).toBe("SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n");
      expect(a.stdout.toString()).toBe(b.stdout.toString());
    });
  });
}
