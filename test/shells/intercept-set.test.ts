/**
 * The intercept set is conservative: every exec a patched shell skips (runs directly, no question asked) would
 * have been decided `Run` by the real decision code (src/escalate/decision/decide.ts over src/execpolicy/), with
 * rules, host executables, amendments, basename fallback, `--preserve-program-paths` and the danger heuristic.
 *
 * 1. Generated policies and execs, checked against `decideExec` (and the check can fail: a set missing the
 *    heuristic's programs or the rules' names is caught by the same generator).
 * 2. The C side (`smcp_mode` in patches/escalate-client.c, in both patched shells) intercepts exactly the
 *    programs {@link shellIntercepts} says, for the same set, names and paths (incl. non-UTF-8 names).
 */
import { describe, expect, test } from "bun:test";
import { mkdirSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { resolveRequest } from "../../src/escalate/decision/request.ts";
import { amendPolicyInMemory } from "../../src/execpolicy/amend.ts";
import { policyFromSources } from "../../src/execpolicy/load.ts";
import type { Policy } from "../../src/execpolicy/policy.ts";
import { decideExec, type EscalationSettings } from "../../src/escalate/decision/decide.ts";
import { HEURISTIC_PROGRAMS, interceptEntries, interceptSetFor, shellIntercepts } from "../../src/escalate/decision/intercept-set.ts";
import { runCaptured } from "../escalate/capture-server.ts";
import { tempDir } from "../helpers/binary.ts";
import { ourWrapper } from "../helpers/escalation.ts";
import { patchedShell, shellsMissing } from "../helpers/shells.ts";
import { rng } from "../helpers/rng.ts";

const NAMES = [
  "git",
  "mygit",
  "gitx",
  "git-lfs",
  "rm",
  "rmdir",
  "sudo",
  "bash",
  "zsh",
  "sh",
  "ksh",
  "ls",
  "cat",
  "python3",
  "tool",
  "*odd",
  "a b",
  "é",
  "x.y",
  "true",
  "-dash",
  "GIT",
];
const ARGS = [
  "-rf",
  "-f",
  "-r",
  "reset",
  "push",
  "--force",
  "-c",
  "-lc",
  "rm -rf x",
  "git reset --hard",
  "ls; git clean -fd",
  "branch",
  "-D",
  "clean",
  "-fd",
  "x",
  "",
  "--",
  "status",
  "+main",
  "-C",
  "/tmp",
];
const DECISIONS = ["allow", "prompt", "forbidden"];

function pick<T>(r: () => number, xs: readonly T[]): T {
  return xs[Math.floor(r() * xs.length)]!;
}

/** A random program path as a shell would exec it (never with a trailing slash/`.`/`..` basename: those are always intercepted). */
function programPath(r: () => number, name: string): string {
  return pick(r, [
    `/usr/bin/${name}`,
    `/opt/${name}`,
    `./${name}`,
    `bin/../${name}`,
    name,
    `/usr/local/bin/${name}`,
    `~/bin/${name}`,
    `/a/./b/${name}`,
  ]);
}

function rulesText(r: () => number): string {
  const lines: string[] = [];
  const n = Math.floor(r() * 7);
  for (let i = 0; i < n; i++) {
    const name = pick(r, NAMES);
    const first = r() < 0.4 ? programPath(r, name) : name;
    const firstTok = r() < 0.2 ? JSON.stringify([first, pick(r, NAMES)]) : JSON.stringify(first);
    const rest = Array.from({ length: Math.floor(r() * 3) }, () =>
      r() < 0.2 ? JSON.stringify([pick(r, ARGS), pick(r, ARGS)]) : JSON.stringify(pick(r, ARGS)),
    );
    lines.push(`prefix_rule(pattern=[${[firstTok, ...rest].join(", ")}], decision=${JSON.stringify(pick(r, DECISIONS))})`);
  }
  if (r() < 0.4) {
    const name = pick(
      r,
      NAMES.filter((x) => !x.includes("/")),
    );
    lines.push(`host_executable(name=${JSON.stringify(name)}, paths=[${JSON.stringify(`/usr/bin/${name}`)}])`);
  }
  return lines.join("\n") + "\n";
}

interface Exec {
  file: string;
  argv: string[];
  workdir: string;
}

function randomExec(r: () => number): Exec {
  const name = pick(r, NAMES);
  const file = programPath(r, name).replace(/^~/, "/root");
  const argv = [pick(r, [file, name, "argv0"]), ...Array.from({ length: Math.floor(r() * 4) }, () => pick(r, ARGS))];
  return { file, argv, workdir: pick(r, ["/work", "/usr/bin", "/opt", "/"]) };
}

async function decidesRun(policy: Policy, e: Exec, preserveProgramPaths: boolean): Promise<boolean> {
  const s: EscalationSettings = { policy, codexHome: "/nonexistent-codex-home", preserveProgramPaths, onPrompt: "deny", memory: new Map() };
  const d = await decideExec(s, { paused: (f) => f() }, resolveRequest({ ...e, env: {} }));
  return d.kind === "Run";
}

/** Violations: execs the shell would skip under `set` although the decision code would not say Run. */
async function violations(seed: number, rounds: number, setFor: (p: Policy) => string): Promise<{ skipped: number; bad: string[] }> {
  const r = rng(seed);
  let skipped = 0;
  const bad: string[] = [];
  for (let round = 0; round < rounds; round++) {
    const text = rulesText(r);
    let policy: Policy;
    try {
      policy = policyFromSources([{ path: "gen.rules", text }]);
    } catch {
      continue; // e.g. a host_executable path whose basename differs: not a policy anyone can load
    }
    if (r() < 0.3) amendPolicyInMemory(policy, [pick(r, NAMES), pick(r, ARGS)]); // "always allow" during the session
    const set = setFor(policy);
    for (let i = 0; i < 20; i++) {
      const e = randomExec(r);
      if (shellIntercepts(set, e.file)) continue;
      skipped++;
      for (const preserve of [false, true]) {
        if (!(await decidesRun(policy, e, preserve)))
          bad.push(`seed ${seed} round ${round}: ${JSON.stringify({ rules: text, set, exec: e, preserve })}`);
      }
    }
  }
  return { skipped, bad };
}

describe("intercept set is conservative", () => {
  test("every skipped exec of generated rules and argv is decided Run", async () => {
    let skipped = 0;
    for (const seed of [1, 2, 3, 4, 5]) {
      const v = await violations(seed, 300, interceptSetFor);
      expect(v.bad.slice(0, 3)).toEqual([]);
      skipped += v.skipped;
    }
    expect(skipped).toBeGreaterThan(1000); // the shells really skip most execs here
  });

  test("the check can fail: a set without the heuristic's programs, or without the rules' names, is caught", async () => {
    const noHeuristics = (p: Policy) =>
      interceptEntries(p)
        .filter((e) => !(HEURISTIC_PROGRAMS as readonly string[]).includes(e))
        .join("/") || "nothing";
    const onlyHeuristics = () => HEURISTIC_PROGRAMS.join("/");
    expect((await violations(1, 300, noHeuristics)).bad.length).toBeGreaterThan(0);
    expect((await violations(1, 300, onlyHeuristics)).bad.length).toBeGreaterThan(0);
  });

  test("amendments during a session reach the next shell run's set", () => {
    const policy = policyFromSources([{ path: "a.rules", text: 'prefix_rule(pattern=["ls"], decision="allow")\n' }]);
    expect(shellIntercepts(interceptSetFor(policy), "/usr/bin/python3")).toBe(false);
    amendPolicyInMemory(policy, ["python3", "-V"]);
    expect(shellIntercepts(interceptSetFor(policy), "/usr/bin/python3")).toBe(true);
  });

  test("path rules and odd names", () => {
    const policy = policyFromSources([
      {
        path: "a.rules",
        text: 'prefix_rule(pattern=["/opt/tools/deploy/"], decision="forbidden")\nprefix_rule(pattern=["*star"], decision="prompt")\n',
      },
    ]);
    const set = interceptSetFor(policy);
    expect(shellIntercepts(set, "/opt/tools/deploy")).toBe(true);
    expect(shellIntercepts(set, "/x/deploy")).toBe(true); // conservative: any path with that basename
    expect(shellIntercepts(set, "/bin/*star")).toBe(true);
    expect(shellIntercepts(set, "/bin/xstar")).toBe(true); // `*` entries are suffixes: covers the literal too
    expect(shellIntercepts(set, "/bin/true")).toBe(false);
    expect(shellIntercepts(set, "/bin/")).toBe(true);
    expect(shellIntercepts(set, "/bin/..")).toBe(true);
    expect(shellIntercepts(set, Buffer.from([0x2f, 0x62, 0xff]))).toBe(true);
  });
});

const missing = shellsMissing();
describe.skipIf(missing !== undefined)("the shells apply the set exactly as shellIntercepts", () => {
  for (const shell of ["bash", "zsh"] as const) {
    test(shell, async () => {
      const dir = tempDir("shellmcp-iset-");
      mkdirSync(join(dir, "bin"));
      const names: Buffer[] = [
        "git",
        "mygit",
        "gitx",
        "rm",
        "rmx",
        "sudo",
        "bash",
        "sh",
        "ls",
        "true",
        "*odd",
        "xodd",
        "a b",
        "é",
        "deploy",
        "tool",
      ].map((n) => Buffer.from(n));
      names.push(Buffer.from([0x67, 0x69, 0x74, 0xff]), Buffer.from([0xff, 0x67, 0x69, 0x74]), Buffer.from("gi\u00e9"));
      for (const n of names) symlinkSync("/bin/true", Buffer.concat([Buffer.from(join(dir, "bin") + "/"), n]));
      const set = "*git/rm/sudo/bash/zsh/sh/*odd/deploy/é";
      const lit = (b: Buffer) => "$'" + [...b].map((x) => `\\x${x.toString(16).padStart(2, "0")}`).join("") + "'";
      const files = names.flatMap((n) => [
        Buffer.concat([Buffer.from(join(dir, "bin") + "/"), n]),
        Buffer.concat([Buffer.from("./bin/"), n]),
      ]);
      const script = files.map((f) => `${lit(f)}`).join("; ") + "; ./bin/../bin/true; /bin/; ./bin/.";
      const wrapper = ourWrapper();
      const r = await runCaptured(
        [patchedShell(shell), "-c", script],
        { PATH: "/usr/bin:/bin", EXEC_WRAPPER: wrapper, BASH_EXEC_WRAPPER: wrapper, SHELLMCP_INTERCEPT: set },
        () => ({ kind: "Run" }),
        dir,
      );
      const got = r.exchanges.map((e) => JSON.parse(e.request.toString()).file as string);
      const expected = files.filter((f) => shellIntercepts(set, f)).map((f) => new TextDecoder().decode(f));
      // zsh does not hand a directory to the wrapper (only executable regular files); bash does.
      if (shell === "bash") expected.push("/bin/", "./bin/.");
      expect(got).toEqual(expected);
      expect(expected.length).toBeGreaterThan(10);
      expect(expected.length).toBeLessThan(files.length); // some were skipped
    });
  }
});
