/**
 * `shellmcp init` through the compiled binary (issue 41): it asks on a terminal and writes only on "y", writes
 * nothing without a terminal unless `--yes`, prints only with `--dry-run`, keeps what a file already holds, and the
 * undo commands it prints put every file back as it was. The real clients using what it writes are in
 * test/clients/*-real.test.ts and test/e2e/codex-real.test.ts.
 */
import { afterAll, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parse } from "smol-toml";
import { ensureBinary } from "../helpers/binary.ts";
import { CONF_BASE } from "../helpers/test-dirs.ts";

const base = mkdtempSync(join(CONF_BASE, "init-"));
afterAll(() => rmSync(base, { recursive: true, force: true }));
let n = 0;

/** A fresh HOME and project. */
function place(): { home: string; proj: string } {
  const d = join(base, String(n++));
  mkdirSync(join(d, "home"), { recursive: true });
  mkdirSync(join(d, "proj"));
  return { home: join(d, "home"), proj: join(d, "proj") };
}

/** `shellmcp init ARGS` in `p`'s project with its HOME, stdin not a terminal. */
function init(p: { home: string; proj: string }, ...args: string[]): { code: number; out: string } {
  const r = Bun.spawnSync([ensureBinary(), "init", ...args], {
    cwd: p.proj,
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: p.home },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  return { code: r.exitCode ?? -1, out: r.stdout.toString() + r.stderr.toString() };
}

/** `shellmcp init ARGS` on a terminal (`script`), answering `answer` to its question. */
async function initOnTerminal(p: { home: string; proj: string }, answer: string, ...args: string[]): Promise<string> {
  const proc = Bun.spawn(["script", "-q", "-e", "-c", [ensureBinary(), "init", ...args].join(" "), "/dev/null"], {
    cwd: p.proj,
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: p.home, TERM: "dumb" },
    stdin: "pipe",
    stdout: "pipe",
  });
  let seen = "";
  const reader = proc.stdout.getReader();
  const deadline = Date.now() + 20_000;
  while (!seen.includes("Write these? [y/N] ") && Date.now() < deadline) {
    const { value, done } = await reader.read();
    if (done) break;
    seen += new TextDecoder().decode(value);
  }
  expect(seen).toContain("Write these? [y/N] ");
  await proc.stdin.write(`${answer}\n`);
  await proc.stdin.flush();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    seen += new TextDecoder().decode(value);
  }
  await proc.exited;
  return seen;
}

test("on a terminal it asks: n writes nothing, y writes", async () => {
  const p = place();
  expect(await initOnTerminal(p, "n", "cursor")).toContain("nothing written.");
  expect(existsSync(join(p.proj, ".cursor"))).toBe(false);
  expect(existsSync(join(p.home, ".codex"))).toBe(false);
  const out = await initOnTerminal(p, "y", "cursor");
  expect(out).toContain("done. To undo it:");
  expect(JSON.parse(readFileSync(join(p.proj, ".cursor", "mcp.json"), "utf8")).mcpServers.shell.args).toEqual([
    "serve",
    "--sandbox",
    "workspace-write",
  ]);
  expect(readFileSync(join(p.home, ".codex", "rules", "agent.rules"), "utf8")).toContain("prefix_rule(");
}, 60_000);

test("without a terminal: nothing without --yes; --dry-run prints the plan only", () => {
  const p = place();
  const r = init(p, "vscode");
  expect(r.code).toBe(1);
  expect(r.out).toContain("nothing written: run it on a terminal to be asked, or pass --yes");
  const dry = init(p, "vscode", "--dry-run");
  expect(dry.code).toBe(0);
  expect(dry.out).toContain(`create ${join(p.proj, ".vscode", "mcp.json")}`);
  expect(dry.out).toContain("dry run: nothing written.");
  expect(existsSync(join(p.proj, ".vscode"))).toBe(false);
  expect(init(p, "nonsense", "--yes")).toMatchObject({ code: 2 });
});

test("merges into files that exist, says what it kept, and the printed undo puts them back byte for byte", () => {
  const p = place();
  mkdirSync(join(p.home, ".codex"));
  const toml =
    '# mine\nmodel = "o3"\n\n[projects."/home/me/x"]\ntrust_level = "trusted"\n\n[shellmcp.room_writable]\nnpm = ["/data/npm"]\n';
  writeFileSync(join(p.home, ".codex", "config.toml"), toml);
  const r = init(p, "codex", "--yes");
  expect(r.code, r.out).toBe(0);
  expect(r.out).toContain("kept yours: shellmcp.room_writable.npm");
  const now = readFileSync(join(p.home, ".codex", "config.toml"), "utf8");
  const doc = parse(now) as Record<string, any>;
  expect(doc.features.shell_tool).toBe(false);
  expect(doc.projects["/home/me/x"]).toEqual({ trust_level: "trusted" });
  expect(doc.shellmcp.room_writable.npm).toEqual(["/data/npm"]);
  expect(doc.mcp_servers.shell.command).toBe(ensureBinary());
  expect(now.indexOf("features.shell_tool")).toBeLessThan(now.indexOf("[projects."));
  // A second run: everything in place, nothing written.
  const again = init(p, "codex", "--yes");
  expect(again.out).toContain("nothing to write: everything is in place.");
  // The undo lines, run as printed.
  const undo = r.out
    .slice(r.out.indexOf("To undo it:"))
    .split("\n")
    .slice(1)
    .filter((l) => l.startsWith("    "))
    .map((l) => l.trim());
  expect(undo.length).toBeGreaterThan(0);
  const u = Bun.spawnSync(["sh", "-ec", undo.join("\n")]);
  expect(u.exitCode, u.stderr.toString()).toBe(0);
  expect(readFileSync(join(p.home, ".codex", "config.toml"), "utf8")).toBe(toml);
  expect(existsSync(join(p.home, ".codex", "rules"))).toBe(false);
});
