/**
 * Differential test: the same rules and commands through `codex execpolicy check` (npm `@openai/codex`,
 * linux build) and `shellmcp execpolicy check` (the compiled binary). stdout must be byte-equal, and both must
 * agree on success vs failure. Inputs: every vendored conformance vector with a non-empty argv, plus generated rule/argv
 * combinations from a seeded generator (alternatives, decisions, justifications, host_executable, absolute
 * and relative program paths, odd tokens).
 */
import { describe, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ensureBinary, ROOT, tempDir } from "../helpers/binary.ts";
import { referenceCodex } from "../helpers/reference.ts";
import { skipWithout } from "../helpers/prereq.ts";
import { rng } from "../helpers/rng.ts";

const codex = referenceCodex();
const skip = skipWithout(
  "execpolicy differential test",
  codex === undefined ? "@openai/codex linux build not installed (npm ci)" : undefined,
);
/** The execpolicy conformance vectors, vendored from the project's shared spec (see test/fixtures/README.md). */
const VECTORS = join(ROOT, "test", "fixtures", "execpolicy", "vectors.json");

interface Case {
  name: string;
  rules: string[];
  argv: string[];
  resolve: boolean;
}

function generated(n: number): Case[] {
  const r = rng(20261121);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
  const PROGRAMS = ["git", "ls", "rm", "npm", "/usr/bin/git", "cargo"];
  const ARGS = ["status", "push", "--force", "-rf", "log", "install", "a b", "é", "x=1", "--", "-"];
  const DECISIONS = ["allow", "prompt", "forbidden"];
  const q = (s: string) => JSON.stringify(s);
  const cases: Case[] = [];
  for (let i = 0; i < n; i++) {
    const lines: string[] = [];
    const patterns: string[][][] = []; // per rule: per position, the alternatives
    const nRules = 1 + Math.floor(r() * 4);
    for (let j = 0; j < nRules; j++) {
      const firstAlts = r() < 0.3 ? [pick(PROGRAMS), pick(PROGRAMS)] : [pick(PROGRAMS)];
      const tailAlts = Array.from({ length: Math.floor(r() * 3) }, () => (r() < 0.25 ? [pick(ARGS), pick(ARGS)] : [pick(ARGS)]));
      const render = (alts: string[]) => (alts.length > 1 ? `[${alts.map(q).join(", ")}]` : q(alts[0]!));
      const parts = [`pattern = [${[firstAlts, ...tailAlts].map(render).join(", ")}]`];
      if (r() < 0.8) parts.push(`decision = ${q(pick(DECISIONS))}`);
      if (r() < 0.4) parts.push(`justification = ${q(`reason ${j} "quoted" \\ path`)}`);
      lines.push(`prefix_rule(${parts.join(", ")})`);
      patterns.push([firstAlts, ...tailAlts]);
    }
    if (r() < 0.3)
      lines.push(`host_executable(name = "git", paths = [${r() < 0.5 ? '"/usr/bin/git"' : '"/opt/git/bin/git", "/usr/local/bin/git"'}])`);
    let argv: string[];
    if (r() < 0.75) {
      // Derive the command from one rule so that most cases match something, then perturb it.
      const pat = pick(patterns);
      argv = pat.map((alts) => pick(alts));
      const first = argv[0]!;
      const roll = r();
      if (!first.startsWith("/") && roll < 0.2) argv[0] = `/usr/bin/${first}`;
      else if (!first.startsWith("/") && roll < 0.3) argv[0] = `/usr/local/bin/${first}`;
      else if (!first.startsWith("/") && roll < 0.35) argv[0] = `./${first}`;
      if (argv.length > 1 && r() < 0.2) argv[1 + Math.floor(r() * (argv.length - 1))] = pick(ARGS);
      argv.push(...Array.from({ length: Math.floor(r() * 3) }, () => pick(ARGS)));
    } else {
      argv = [
        pick([...PROGRAMS, "/usr/local/bin/git", "/bin/rm", "./git", "sub/ls"]),
        ...Array.from({ length: Math.floor(r() * 4) }, () => pick(ARGS)),
      ];
    }
    cases.push({ name: `generated-${i}`, rules: [lines.join("\n") + "\n"], argv, resolve: r() < 0.6 });
  }
  return cases;
}

function fromVectors(): Case[] {
  const vs = JSON.parse(readFileSync(VECTORS, "utf8")) as {
    name: string;
    rules: string | string[];
    argv: string[];
    options?: { resolveHostExecutables?: boolean };
  }[];
  return vs
    .filter((v) => v.argv.length > 0)
    .map((v) => ({
      name: `vector-${v.name}`,
      rules: Array.isArray(v.rules) ? v.rules : [v.rules],
      argv: v.argv,
      resolve: v.options?.resolveHostExecutables ?? false,
    }));
}

function runCheck(exe: string[], dir: string, c: Case): { status: number; stdout: string } {
  const args = [
    ...c.rules.flatMap((_, i) => ["--rules", `r${i}.rules`]),
    ...(c.resolve ? ["--resolve-host-executables"] : []),
    "--",
    ...c.argv,
  ];
  // HOME and CODEX_HOME of the test's own (Codex creates $CODEX_HOME/tmp): never the machine's.
  const p = Bun.spawnSync([...exe, "execpolicy", "check", ...args], {
    cwd: dir,
    env: { PATH: "/usr/bin:/bin", HOME: dir, CODEX_HOME: join(dir, ".codex") },
  });
  return { status: p.exitCode ?? -1, stdout: p.stdout.toString() };
}

describe.skipIf(skip)("execpolicy check: byte-equal to codex execpolicy check", () => {
  const cases = [...fromVectors(), ...generated(60)];

  test("enough cases", () => {
    expect(cases.filter((c) => c.name.startsWith("generated-")).length).toBeGreaterThanOrEqual(50);
  });

  for (const c of cases) {
    test(c.name, () => {
      const dir = tempDir("shellmcp-diff-");
      c.rules.forEach((text, i) => writeFileSync(join(dir, `r${i}.rules`), text));
      const theirs = runCheck([codex!], dir, c);
      const ours = runCheck([ensureBinary()], dir, c);
      expect(ours.status === 0).toBe(theirs.status === 0);
      expect(ours.stdout).toBe(theirs.stdout);
    });
  }
});
