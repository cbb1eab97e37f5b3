/**
 * Seatbelt golden tests: for each case, `shellmcp sandbox macos --print-policy` (the real CLI code, with the
 * platform injected as linux) prints the policy, the sandbox-exec argv and the environment markers, which must equal
 * the reviewed file test/fixtures/seatbelt/<case>.sbpl. The fixture tree lives under /tmp (so the output shows the
 * `/tmp` → `/private/tmp` canonicalisation a Mac applies); its random folder name is replaced by `WS`.
 *
 * Regenerate after a deliberate change with `UPDATE_GOLDEN=1 bun test test/sandbox/macos/golden.test.ts`, then
 * review the diff: every line of it is a change of what commands may do on a Mac.
 *
 * Also here: the trace test (every rule of every generated policy carries an id that docs/seatbelt.md traces to a
 * Codex rule, and every id in that table exists), and the invariant that no user path is ever spliced into the
 * policy text (paths travel as -D parameters only).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import { sandboxMacosCli, type MacosCliOptions } from "../../../src/sandbox-cli/macos.ts";
import { BASE_RULES, DYNAMIC_RULE_IDS, NETWORK_RULES, PLATFORM_DEFAULT_RULES } from "../../../src/sandbox/macos/rules.ts";

const ROOT = join(import.meta.dir, "..", "..", "..");
const GOLDEN = join(ROOT, "test", "fixtures", "seatbelt");
const UPDATE = process.env.UPDATE_GOLDEN === "1";

// The fixture tree.
const WS = mkdtempSync("/tmp/sbgold-");
const WS_NAME = basename(WS);
const proj = join(WS, "proj");
mkdirSync(join(proj, ".git", "worktrees", "wt"), { recursive: true });
mkdirSync(join(proj, ".codex"));
mkdirSync(join(proj, "secret"));
const wt = join(WS, "wt");
mkdirSync(wt);
writeFileSync(join(wt, ".git"), "gitdir: ../proj/.git/worktrees/wt\n");
const agentsProj = join(WS, "agents-proj");
mkdirSync(join(agentsProj, ".agents"), { recursive: true });
const extra = join(WS, "extra");
mkdirSync(extra);
const tmpdir = join(WS, "tmpdir");
mkdirSync(tmpdir);
const odd = join(WS, `dir with space "q" 'x' (y)`);
mkdirSync(join(odd, ".git"), { recursive: true });
const ro1 = join(WS, "ro1");
const ro2 = join(WS, "ro2");
mkdirSync(ro1);
mkdirSync(ro2);
const link = join(WS, "link");
symlinkSync(proj, link);
// A .git that is a symlink to a git folder elsewhere (both the link and its target stay read-only).
const gitLinked = join(WS, "git-linked");
mkdirSync(join(WS, "gitstore"));
mkdirSync(gitLinked);
symlinkSync("../gitstore", join(gitLinked, ".git"));

afterAll(() => rmSync(WS, { recursive: true, force: true }));

interface Case {
  name: string;
  cwd: string;
  env?: Record<string, string>;
  opts: Partial<MacosCliOptions>;
  cmd?: string[];
}

const noTmp = { exclude_slash_tmp: true, exclude_tmpdir_env_var: true };
const profileWorkspace = (cwd: string, network: "restricted" | "enabled") => ({
  type: "managed",
  file_system: {
    type: "restricted",
    entries: [
      { path: { type: "special", value: { kind: "root" } }, access: "read" },
      { path: { type: "path", path: cwd }, access: "write" },
      { path: { type: "special", value: { kind: "slash_tmp" } }, access: "write" },
      { path: { type: "special", value: { kind: "tmpdir" } }, access: "write" },
      ...[".git", ".agents", ".codex", ".aws"].map((n) => ({
        path: { type: "path", path: join(cwd, n) },
        access: "read",
        missing_path_behavior: "skip",
      })),
    ],
  },
  network,
});

const CASES: Case[] = [
  { name: "read-only", cwd: proj, opts: {} },
  { name: "read-only-network", cwd: proj, opts: { network: true } },
  { name: "full-auto", cwd: proj, env: { TMPDIR: tmpdir }, opts: { fullAuto: true } },
  { name: "full-auto-network", cwd: proj, env: { TMPDIR: tmpdir }, opts: { fullAuto: true, network: true } },
  { name: "full-auto-add-dir", cwd: proj, opts: { fullAuto: true, addDir: [extra] } },
  {
    name: "workspace-write-no-tmp",
    cwd: proj,
    opts: { policy: JSON.stringify({ type: "workspace-write", writable_roots: [extra], ...noTmp }) },
  },
  { name: "git-file-pointer", cwd: wt, opts: { policy: JSON.stringify({ type: "workspace-write", ...noTmp }) } },
  { name: "agents-dir", cwd: agentsProj, opts: { policy: JSON.stringify({ type: "workspace-write", ...noTmp }) } },
  {
    name: "tmp-and-var-canonical",
    cwd: proj,
    env: { TMPDIR: "/var/tmp" },
    opts: { policy: JSON.stringify({ type: "workspace-write", writable_roots: [extra] }) },
  },
  { name: "git-symlink", cwd: gitLinked, opts: { policy: JSON.stringify({ type: "workspace-write", ...noTmp }) } },
  { name: "symlinked-cwd", cwd: link, opts: { policy: JSON.stringify({ type: "workspace-write", ...noTmp }) } },
  {
    name: "spaces-and-quotes",
    cwd: odd,
    opts: { policy: JSON.stringify({ type: "workspace-write", ...noTmp }) },
    cmd: ["sh", "-c", `echo "it's" > 'a b'`],
  },
  {
    name: "restricted-read",
    cwd: proj,
    opts: {
      policy: JSON.stringify({
        type: "read-only",
        access: { type: "restricted", include_platform_defaults: false, readable_roots: [ro1, ro2] },
      }),
    },
  },
  {
    name: "restricted-read-platform-defaults",
    cwd: proj,
    opts: {
      policy: JSON.stringify({ type: "read-only", access: { type: "restricted", include_platform_defaults: true, readable_roots: [ro1] } }),
    },
  },
  {
    name: "workspace-write-restricted-read",
    cwd: proj,
    opts: {
      policy: JSON.stringify({
        type: "workspace-write",
        writable_roots: [extra],
        read_only_access: { type: "restricted", include_platform_defaults: true, readable_roots: [ro1] },
        ...noTmp,
      }),
    },
  },
  { name: "danger-full-access", cwd: proj, opts: { sandbox: "danger-full-access" } },
  { name: "external-sandbox", cwd: proj, opts: { policy: JSON.stringify({ type: "external-sandbox", network_access: "restricted" }) } },
  {
    name: "profile-0.169-workspace",
    cwd: proj,
    env: { TMPDIR: tmpdir },
    opts: { permissionProfile: JSON.stringify(profileWorkspace(proj, "restricted")) },
  },
  { name: "profile-0.169-workspace-network", cwd: wt, opts: { permissionProfile: JSON.stringify(profileWorkspace(wt, "enabled")) } },
  {
    name: "profile-0.169-read-only",
    cwd: proj,
    opts: {
      permissionProfile: JSON.stringify({
        type: "managed",
        file_system: { type: "restricted", entries: [{ path: { type: "special", value: { kind: "root" } }, access: "read" }] },
        network: "restricted",
      }),
    },
  },
  {
    name: "profile-0.169-deny",
    cwd: proj,
    opts: {
      permissionProfile: JSON.stringify({
        type: "managed",
        file_system: {
          type: "restricted",
          entries: [
            { path: { type: "special", value: { kind: "root" } }, access: "read" },
            { path: { type: "special", value: { kind: "project_roots" } }, access: "write" },
            { path: { type: "path", path: join(proj, "secret") }, access: "none" },
          ],
        },
        network: "restricted",
      }),
    },
  },
  {
    name: "profile-0.169-minimal",
    cwd: proj,
    opts: {
      permissionProfile: JSON.stringify({
        type: "managed",
        file_system: {
          type: "restricted",
          entries: [
            { path: { type: "special", value: { kind: "minimal" } }, access: "read" },
            { path: { type: "special", value: { kind: "project_roots" } }, access: "write" },
            { path: { type: "path", path: join(proj, ".git") }, access: "read" },
          ],
        },
        network: "enabled",
      }),
    },
  },
  { name: "profile-0.169-disabled", cwd: proj, opts: { permissionProfile: JSON.stringify({ type: "disabled" }) } },
];

async function printPolicy(c: Case): Promise<{ code: number; out: string; err: string }> {
  let out = "";
  let err = "";
  const code = await sandboxMacosCli(
    c.cmd ?? ["ls", "-la"],
    { addDir: [], printPolicy: true, ...c.opts },
    {
      platform: "linux",
      cwd: c.cwd,
      env: { PATH: "/usr/bin:/bin", ...c.env },
      out: (t) => (out += t),
      err: (t) => (err += t),
      run: async () => {
        throw new Error("--print-policy must not run anything");
      },
    },
  );
  return { code, out: out.replaceAll(WS_NAME, "sbgold-WS"), err };
}

/** Top-level forms of an SBPL text, each with the comment lines right above it. */
function forms(text: string): Array<{ comments: string[]; form: string }> {
  const out: Array<{ comments: string[]; form: string }> = [];
  let comments: string[] = [];
  let depth = 0;
  let cur = "";
  for (const line of text.split("\n")) {
    if (depth === 0 && line.startsWith(";")) {
      comments.push(line);
      continue;
    }
    if (depth === 0 && line.trim() === "") continue;
    cur += (cur ? "\n" : "") + line;
    // Paths never appear in the text, and no string literal here contains a parenthesis.
    for (const ch of line.replace(/"(?:[^"\\]|\\.)*"/g, '""')) {
      if (ch === "(") depth++;
      else if (ch === ")") depth--;
    }
    expect(depth).toBeGreaterThanOrEqual(0);
    if (depth === 0) {
      out.push({ comments, form: cur });
      comments = [];
      cur = "";
    }
  }
  expect(depth).toBe(0);
  return out;
}

describe("Seatbelt golden policies", () => {
  test("at least 15 cases", () => expect(CASES.length).toBeGreaterThanOrEqual(15));
  for (const c of CASES) {
    test(c.name, async () => {
      const r = await printPolicy(c);
      expect(r.err).toBe("");
      expect(r.code).toBe(0);
      const file = join(GOLDEN, `${c.name}.sbpl`);
      if (UPDATE || !existsSync(file)) {
        if (!UPDATE) throw new Error(`missing golden file ${file} (run with UPDATE_GOLDEN=1 and review it)`);
        mkdirSync(GOLDEN, { recursive: true });
        writeFileSync(file, r.out);
      }
      expect(r.out).toBe(readFileSync(file, "utf8"));
    });
  }
});

describe("the policy text does not depend on what exists on the host (issue 20)", () => {
  // A writable root of its own (standing in for /tmp or $TMPDIR, whose contents belong to the machine): the
  // legacy policy must read the same whether or not `.codex`, `.agents` or `.git` exist in it, also when the
  // root is the cwd and when it is an extra writable root.
  const host = join(WS, "host-root");
  const work = join(WS, "host-work");
  mkdirSync(host);
  mkdirSync(work);
  const policy = JSON.stringify({ type: "workspace-write", writable_roots: [host], ...noTmp });
  for (const [name, cwd] of [
    ["as an extra writable root", work],
    ["as the cwd", host],
  ] as const) {
    test(name, async () => {
      const c: Case = { name, cwd, opts: { policy } };
      const bare = await printPolicy(c);
      expect(bare.code).toBe(0);
      expect(bare.out).toContain(`${host.replace(WS_NAME, "sbgold-WS")}/.codex`);
      for (const present of [[".codex"], [".agents"], [".codex", ".agents"]]) {
        for (const n of present) mkdirSync(join(host, n));
        try {
          expect((await printPolicy(c)).out).toBe(bare.out);
        } finally {
          for (const n of present) rmSync(join(host, n), { recursive: true });
        }
      }
    });
  }
});

describe("every generated rule traces to a Codex rule (docs/seatbelt.md)", () => {
  const doc = readFileSync(join(ROOT, "docs", "seatbelt.md"), "utf8");
  const tableIds = new Set([...doc.matchAll(/^\| \[([A-Z]\d\d)\] \|/gm)].map((m) => m[1]!));
  const knownIds = new Set(
    [...BASE_RULES, ...NETWORK_RULES, ...PLATFORM_DEFAULT_RULES].map((r) => r.id).concat(Object.values(DYNAMIC_RULE_IDS)),
  );

  test("the table and the generator name the same rules", () => {
    expect([...tableIds].sort()).toEqual([...knownIds].sort());
  });

  test("each table row names a Codex rule and says whether the meaning differs", () => {
    for (const m of doc.matchAll(/^\| \[([A-Z]\d\d)\] \|(.*)$/gm)) {
      const cells = m[2]!.split("|").map((s) => s.trim());
      expect(cells.length, `row ${m[1]}`).toBeGreaterThanOrEqual(4);
      expect(cells[1]!.length, `row ${m[1]} needs the Codex rule`).toBeGreaterThan(3);
      expect(cells[2], `row ${m[1]}: same or differs`).toMatch(/^(same|differs|shellmcp only|dropped)/);
    }
  });

  for (const c of CASES) {
    test(`${c.name}: every form is announced by a traced id; no path in the text`, async () => {
      const r = await printPolicy(c);
      const policy = r.out.split("\n;; ---- argv ----")[0]!;
      if (policy.startsWith(";; not sandboxed")) return;
      const fs = forms(policy);
      expect(fs[0]!.form).toBe("(version 1)");
      let current: string | undefined;
      for (const f of fs.slice(1)) {
        const tag = f.comments.map((l) => /^; \[([A-Z]\d\d)\] /.exec(l)?.[1]).find((x) => x !== undefined);
        if (tag !== undefined) current = tag;
        expect(current, `form without an id: ${f.form}`).toBeDefined();
        expect(tableIds.has(current!), `id ${current} is not in docs/seatbelt.md`).toBe(true);
      }
      // Paths of the workspace only ever travel as -D parameters.
      expect(policy).not.toContain("sbgold");
      expect(policy).not.toContain(WS);
    });
  }
});
