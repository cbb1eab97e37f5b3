/**
 * `shellmcp init`'s merge logic (src/init/merge.ts, issue 41): a client's JSON and Codex's TOML gain the entries,
 * lose nothing, and keep what was already set; and the plan over files (src/init/init.ts `planInit`) for each
 * client, in a temporary HOME and project. Pure apart from the temporary files.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse } from "smol-toml";
import { mergeJsonServer, mergeToml, type TomlEntry } from "../../src/init/merge.ts";
import { applyPlan, planInit, type InitEnv } from "../../src/init/init.ts";
import { STARTER_RULES, starterEntries } from "../../src/init/starter.ts";

const ENTRY = { command: "/opt/shellmcp", args: ["serve", "--sandbox", "workspace-write"] };

describe("mergeJsonServer", () => {
  test("no file: a new object with the server", () => {
    const r = mergeJsonServer(undefined, "mcpServers", "shell", ENTRY);
    expect(JSON.parse(r.text)).toEqual({ mcpServers: { shell: ENTRY } });
    expect(r.entries).toEqual([{ entry: "mcpServers.shell", outcome: "added" }]);
  });

  test("other keys and servers are kept, with the file's indentation", () => {
    const before = JSON.stringify({ theme: "dark", mcpServers: { other: { command: "x", env: { A: "1" } } }, list: [1, 2] }, null, 4);
    const r = mergeJsonServer(before, "mcpServers", "shell", ENTRY);
    expect(JSON.parse(r.text)).toEqual({ ...JSON.parse(before), mcpServers: { other: { command: "x", env: { A: "1" } }, shell: ENTRY } });
    expect(r.text).toContain('\n    "theme"');
  });

  test("the same server already there: present, text unchanged; another one: kept, never overwritten", () => {
    const same = JSON.stringify({ servers: { shell: { args: ENTRY.args, command: ENTRY.command } } });
    expect(mergeJsonServer(same, "servers", "shell", ENTRY)).toEqual({
      text: same,
      entries: [{ entry: "servers.shell", outcome: "present" }],
    });
    const other = JSON.stringify({ servers: { shell: { command: "npx", args: ["other"] } } });
    const r = mergeJsonServer(other, "servers", "shell", ENTRY);
    expect(r.text).toBe(other);
    expect(r.entries[0]).toMatchObject({ outcome: "kept", found: '{"command":"npx","args":["other"]}' });
  });

  test("JSON with comments, or not an object: refused (nothing rewritten)", () => {
    expect(() => mergeJsonServer('{ // mine\n "a": 1 }', "mcpServers", "shell", ENTRY)).toThrow(/not plain JSON/);
    expect(() => mergeJsonServer("[1]", "mcpServers", "shell", ENTRY)).toThrow(/not a JSON object/);
    expect(() => mergeJsonServer('{"mcpServers": 3}', "mcpServers", "shell", ENTRY)).toThrow(/mcpServers is not an object/);
  });
});

const CODEX: TomlEntry[] = [
  { table: ["features"], key: "shell_tool", value: "false" },
  { table: ["mcp_servers", "shell"], key: "command", value: '"/opt/shellmcp"' },
  { table: ["mcp_servers", "shell"], key: "args", value: '["serve"]' },
];

describe("mergeToml", () => {
  test("the top-level key goes above the first table (after it, it would be that table's key)", () => {
    const before = 'model = "o3"\n\n[projects."/home/me/p"]\ntrust_level = "trusted"\n';
    const r = mergeToml(before, CODEX);
    const doc = parse(r.text) as Record<string, any>;
    expect(doc.features).toEqual({ shell_tool: false });
    expect(doc.projects["/home/me/p"]).toEqual({ trust_level: "trusted" });
    expect(doc.mcp_servers.shell).toEqual({ command: "/opt/shellmcp", args: ["serve"] });
    expect(r.text.indexOf("features.shell_tool = false")).toBeLessThan(r.text.indexOf("[projects."));
    expect(r.text.startsWith(before.split("\n\n")[0]!)).toBe(true); // lines inserted, none rewritten
  });

  test("an existing [features] table gets the key under its header; comments and order stay", () => {
    const before = '# my config\n[features]\n# web\nweb_search = true\n\n[mcp_servers.other]\ncommand = "x"\n';
    const r = mergeToml(before, CODEX);
    expect(r.text).toContain("[features]\nshell_tool = false\n# web\nweb_search = true");
    expect(r.text).toContain("# my config");
    const doc = parse(r.text) as Record<string, any>;
    expect(doc.features).toEqual({ web_search: true, shell_tool: false });
    expect(doc.mcp_servers.other).toEqual({ command: "x" });
  });

  test("a table with a header gains keys under it; keys already set keep the user's value", () => {
    const before = '[shellmcp.room_writable]\nnpm = ["/data/npm-cache"]\n';
    const r = mergeToml(before, starterEntries());
    const doc = parse(r.text) as Record<string, any>;
    expect(doc.shellmcp.room_writable.npm).toEqual(["/data/npm-cache"]);
    expect(doc.shellmcp.room_writable.yarn).toEqual(["~/.cache/yarn"]);
    expect(doc.shellmcp.room_network.npm).toEqual(["registry.npmjs.org"]);
    expect(r.entries.find((e) => e.entry === "shellmcp.room_writable.npm")).toMatchObject({ outcome: "kept" });
  });

  test("everything present: the text is returned unchanged", () => {
    const once = mergeToml(undefined, [...CODEX, ...starterEntries()]).text;
    const twice = mergeToml(once, [...CODEX, ...starterEntries()]);
    expect(twice.text).toBe(once);
    expect(twice.entries.every((e) => e.outcome === "present")).toBe(true);
  });

  test("a table set inline cannot gain lines: refused; a file that does not parse: refused", () => {
    expect(() => mergeToml('mcp_servers = { shell = { command = "x" } }\n', [CODEX[2]!])).toThrow(/add .* by hand|would not parse/);
    expect(() => mergeToml("features = { a = true }\n", [CODEX[0]!])).toThrow(/by hand/);
    expect(() => mergeToml("a = \n", CODEX)).toThrow(/does not parse as TOML/);
  });

  test("a multi-line array whose lines start with [ is not taken for a header", () => {
    const before = "dirs = [\n[1, 2],\n]\n[x]\ny = 1\n";
    const r = mergeToml(before, [CODEX[0]!]);
    expect(parse(r.text)).toEqual({ dirs: [[1, 2]], features: { shell_tool: false }, x: { y: 1 } });
  });
});

describe("planInit and applyPlan", () => {
  const base = mkdtempSync(join(tmpdir(), "init-plan-"));
  afterAll(() => rmSync(base, { recursive: true, force: true }));
  let n = 0;
  const env = (): InitEnv => {
    const d = join(base, String(n++));
    mkdirSync(join(d, "proj"), { recursive: true });
    return {
      home: join(d, "home"),
      codexHome: join(d, "home", ".codex"),
      project: join(d, "proj"),
      command: ["/opt/shellmcp"],
      which: (p) => p === "npm",
    };
  };

  test("each client's file, at its place, with its shape", () => {
    const e = env();
    const files = (c: Parameters<typeof planInit>[0]) =>
      Object.fromEntries(
        planInit(c, { starter: false }, e).changes.map((ch) => [
          ch.path.slice(e.project.length + 1).replace(/^.*home\//, "~/"),
          JSON.parse(ch.after),
        ]),
      );
    expect(files("claude")).toEqual({ ".mcp.json": { mcpServers: { shell: ENTRY } } });
    expect(files("cursor")).toEqual({ ".cursor/mcp.json": { mcpServers: { shell: ENTRY } } });
    expect(files("vscode")).toEqual({ ".vscode/mcp.json": { servers: { shell: { type: "stdio", ...ENTRY } } } });
    const gemini = planInit("gemini", { starter: false, name: "sh" }, e).changes[0]!;
    expect(gemini.path).toBe(join(e.home, ".gemini", "settings.json"));
    expect(JSON.parse(gemini.after)).toEqual({ mcpServers: { sh: { ...ENTRY, trust: true } } });
    const codex = planInit("codex", { starter: false }, e).changes[0]!;
    expect(codex.path).toBe(join(e.codexHome, "config.toml"));
    expect(parse(codex.after)).toEqual({
      features: { shell_tool: false },
      mcp_servers: { shell: { command: "/opt/shellmcp", args: ["serve"], required: true, default_tools_approval_mode: "approve" } },
    });
  });

  test("written, then undone exactly by the printed commands; a second run finds everything in place", () => {
    const e = env();
    mkdirSync(e.home, { recursive: true });
    const settings = join(e.home, ".gemini", "settings.json");
    mkdirSync(join(e.home, ".gemini"));
    const mine = JSON.stringify({ theme: "x", mcpServers: { mine: { command: "y" } } });
    writeFileSync(settings, mine);
    const plan = planInit("gemini", {}, e);
    expect(plan.folders).toEqual([join(e.home, ".npm")]); // npm is "installed", pnpm and yarn are not
    const undo = applyPlan(plan);
    expect(readFileSync(join(e.codexHome, "rules", "agent.rules"), "utf8")).toBe(STARTER_RULES.text);
    expect(JSON.parse(readFileSync(settings, "utf8")).mcpServers.mine).toEqual({ command: "y" });
    const again = planInit("gemini", {}, e);
    expect(again.folders).toEqual([]);
    expect(again.changes.every((c) => c.after === c.before)).toBe(true);
    const r = Bun.spawnSync(["sh", "-ec", undo.join("\n")]);
    expect(r.exitCode, r.stderr.toString()).toBe(0);
    expect(readFileSync(settings, "utf8")).toBe(mine);
    expect(Bun.spawnSync(["find", e.home]).stdout.toString().trim().split("\n").sort()).toEqual(
      [e.home, join(e.home, ".gemini"), settings].sort(),
    );
  });

  test("a server of the same name with another command: a problem, and the file is not changed", () => {
    const e = env();
    writeFileSync(join(e.project, ".mcp.json"), JSON.stringify({ mcpServers: { shell: { command: "other" } } }));
    const plan = planInit("claude", { starter: false }, e);
    expect(plan.problems[0]).toContain('a server named "shell" is already there');
    expect(plan.changes[0]!.after).toBe(plan.changes[0]!.before!);
    mkdirSync(e.codexHome, { recursive: true });
    writeFileSync(join(e.codexHome, "config.toml"), '[mcp_servers.shell]\ncommand = "npx"\n');
    const codex = planInit("codex", { starter: false }, e);
    expect(codex.problems[0]).toContain('a server named "shell" is already there');
    expect(parse(codex.changes[0]!.after)).toEqual({ features: { shell_tool: false }, mcp_servers: { shell: { command: "npx" } } });
  });
});
