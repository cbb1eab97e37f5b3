import { describe, expect, test } from "bun:test";
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { amendmentLine, amendPolicyInMemory, appendAllowRule } from "../../src/execpolicy/amend.ts";
import { discoverRulesFiles, loadPolicy, projectDirs, resolveCodexHome } from "../../src/execpolicy/discovery.ts";
import { policyFromSources, RulesError } from "../../src/execpolicy/load.ts";
import { tempDir } from "../helpers/binary.ts";

function layout() {
  const root = tempDir("shellmcp-disc-");
  const system = join(root, "etc-codex");
  const home = join(root, "codex-home");
  const repo = join(root, "repo");
  const sub = join(repo, "pkg", "sub");
  for (const d of [
    join(system, "rules"),
    join(home, "rules"),
    join(repo, ".git"),
    join(repo, ".codex", "rules"),
    join(sub, ".codex", "rules"),
  ])
    mkdirSync(d, { recursive: true });
  writeFileSync(join(system, "rules", "b.rules"), 'prefix_rule(pattern = ["sys-b"])\n');
  writeFileSync(join(system, "rules", "a.rules"), 'prefix_rule(pattern = ["sys-a"])\n');
  writeFileSync(join(system, "rules", "notes.txt"), "not rules");
  writeFileSync(join(system, "rules", ".rules"), "dotfile: ignored");
  mkdirSync(join(system, "rules", "nested.rules"));
  writeFileSync(join(home, "rules", "default.rules"), 'prefix_rule(pattern = ["user"])\n');
  symlinkSync(join(home, "rules", "default.rules"), join(home, "rules", "link.rules"));
  writeFileSync(join(repo, ".codex", "rules", "p.rules"), 'prefix_rule(pattern = ["curl"], decision = "allow")\n');
  writeFileSync(join(sub, ".codex", "rules", "q.rules"), 'prefix_rule(pattern = ["sub"])\n');
  return { root, system, home, repo, sub };
}

describe("discovery", () => {
  test("system, user, then trusted project layers root→cwd, then --rules; sorted, non-recursive, regular files only", () => {
    const l = layout();
    writeFileSync(join(l.home, "config.toml"), `[projects."${l.repo}"]\ntrust_level = "trusted"\n`);
    const extra = join(l.root, "extra.rules");
    writeFileSync(extra, "");
    const files = discoverRulesFiles({ codexHome: l.home, systemDir: l.system, cwd: l.sub, extraRules: [extra] });
    expect(files).toEqual([
      { path: join(l.system, "rules", "a.rules"), layer: "system" },
      { path: join(l.system, "rules", "b.rules"), layer: "system" },
      { path: join(l.home, "rules", "default.rules"), layer: "user" },
      { path: join(l.repo, ".codex", "rules", "p.rules"), layer: "project" },
      { path: join(l.sub, ".codex", "rules", "q.rules"), layer: "project" },
      { path: extra, layer: "flag" },
    ]);
    const { policy } = loadPolicy({ codexHome: l.home, systemDir: l.system, cwd: l.sub });
    expect(policy.check(["curl", "x"]).decision).toBe("allow");
  });

  test("an untrusted repository cannot add rules (it could grant itself escalations)", () => {
    const l = layout();
    const files = discoverRulesFiles({ codexHome: l.home, systemDir: l.system, cwd: l.sub }).map((f) => f.layer);
    expect(files).not.toContain("project");
    const { policy } = loadPolicy({ codexHome: l.home, systemDir: l.system, cwd: l.sub });
    expect(policy.check(["curl", "x"]).decision).toBeUndefined();
  });

  test("project dirs stop at the repository root; without one, only the cwd", () => {
    const l = layout();
    expect(projectDirs(l.sub)).toEqual([l.repo, join(l.repo, "pkg"), l.sub]);
    const lone = tempDir();
    expect(projectDirs(lone)).toEqual([lone]);
  });

  test("a broken file anywhere fails the load with its path (never silently dropped)", () => {
    const l = layout();
    writeFileSync(join(l.home, "rules", "zz-broken.rules"), 'prefix_rule(pattern = ["x"], decision = "nope")\n');
    let err: unknown;
    try {
      loadPolicy({ codexHome: l.home, systemDir: l.system });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(RulesError);
    expect((err as RulesError).data.path).toBe(join(l.home, "rules", "zz-broken.rules"));
  });

  test("rules that is a file, not a folder, is an error", () => {
    const home = tempDir();
    writeFileSync(join(home, "rules"), "oops");
    expect(() => discoverRulesFiles({ codexHome: home, systemDir: tempDir() })).toThrow(RulesError);
  });

  test("CODEX_HOME must exist when set; default ~/.codex", () => {
    expect(() => resolveCodexHome({ CODEX_HOME: "/nonexistent/codex-home" })).toThrow("does not exist");
    expect(resolveCodexHome({ CODEX_HOME: "" })).toEndWith("/.codex");
  });
});

describe("amendment", () => {
  test("appends Codex's exact line, JSON-escaped, deduplicated, fixing a missing final newline", () => {
    const home = tempDir();
    expect(amendmentLine(["echo", "Hello, world!"])).toBe('prefix_rule(pattern=["echo", "Hello, world!"], decision="allow")');
    expect(amendmentLine(['a"b', "c\\d", "new\nline", "é", "\u0001"])).toBe(
      'prefix_rule(pattern=["a\\"b", "c\\\\d", "new\\nline", "é", "\\u0001"], decision="allow")',
    );
    expect(() => amendmentLine([])).toThrow("prefix rule requires at least one token");
    mkdirSync(join(home, "rules"));
    writeFileSync(join(home, "rules", "default.rules"), 'prefix_rule(pattern=["ls"], decision="allow")'); // no final newline
    expect(appendAllowRule(home, ["git", "push"]).added).toBe(true);
    expect(appendAllowRule(home, ["git", "push"]).added).toBe(false);
    const text = readFileSync(join(home, "rules", "default.rules"), "utf8");
    expect(text).toBe('prefix_rule(pattern=["ls"], decision="allow")\nprefix_rule(pattern=["git", "push"], decision="allow")\n');
    // The file still loads, and means what was asked.
    expect(policyFromSources([{ path: "default.rules", text }]).check(["git", "push", "origin"]).decision).toBe("allow");
  });

  test("creates rules/ when missing; concurrent appends neither tear nor duplicate", async () => {
    const home = tempDir();
    const writers = Array.from({ length: 8 }, (_, i) =>
      Bun.spawn([
        process.execPath,
        "-e",
        `const { appendAllowRule } = await import(${JSON.stringify(join(import.meta.dir, "../../src/execpolicy/amend.ts"))}); for (let j = 0; j < 20; j++) appendAllowRule(${JSON.stringify(home)}, ["tool", String(j % 10), "w${i % 2}"]);`,
      ]),
    );
    await Promise.all(writers.map((w) => w.exited));
    const lines = readFileSync(join(home, "rules", "default.rules"), "utf8")
      .trimEnd()
      .split("\n");
    expect(lines.length).toBe(20); // 10 values × 2 writer groups, each once
    expect(new Set(lines).size).toBe(20);
    for (const l of lines) expect(l).toMatch(/^prefix_rule\(pattern=\["tool", "\d", "w[01]"\], decision="allow"\)$/);
  });

  test("in-memory amendment never outranks a stricter rule", () => {
    const p = policyFromSources([
      { path: "r", text: 'prefix_rule(pattern = ["git", "push"], decision = "forbidden")\nprefix_rule(pattern = ["ls"])\n' },
    ]);
    expect(amendPolicyInMemory(p, ["ls", "-l"])).toBe(false); // already allowed by a real rule
    expect(amendPolicyInMemory(p, ["git", "push"])).toBe(true);
    expect(p.check(["git", "push"]).decision).toBe("forbidden");
    expect(amendPolicyInMemory(p, ["make"])).toBe(true);
    expect(p.check(["make", "all"]).decision).toBe("allow");
  });
});
