/**
 * Unit tests of the protected paths a plan lists inside writable roots (src/sandbox/roots.ts and src/sandbox/git/nested.ts, issue 34 items 4
 * and 5): the search for nested repositories (depth, skipped folders, symlinks, `.git` files and the gitdirs they
 * may point at, the working folder's repository at any depth) and the protected config folders (CODEX_HOME,
 * `/etc/codex`: read-only carve-outs, their first missing component, roots inside them dropped, Landlock refused).
 */
import { afterAll, afterEach, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CONF_BASE } from "../helpers/test-dirs.ts";
import { landlockCanEnforce, planPermissionProfile, planSandboxPolicy } from "../../src/sandbox/filesystem-plan.ts";
import { configCarveOuts, rootInConfigDir, setProtectedConfigDirs } from "../../src/sandbox/protected-config.ts";
import { nestedGitPaths } from "../../src/sandbox/git/nested.ts";
import { parseSandboxPolicy } from "../../src/sandbox/policy.ts";

const base = realpathSync(mkdtempSync(join(CONF_BASE, "protected-")));
afterAll(() => rmSync(base, { recursive: true, force: true }));
afterEach(() => setProtectedConfigDirs([]));

/** A fresh root folder for one test. */
function root(name: string): string {
  const r = join(base, name);
  mkdirSync(r);
  return r;
}

/** A git dir at `dir/.git` (with HEAD, as git requires). */
function gitDir(dir: string): string {
  const g = join(dir, ".git");
  mkdirSync(g, { recursive: true });
  writeFileSync(join(g, "HEAD"), "ref: refs/heads/main\n");
  return g;
}

describe("nestedGitPaths", () => {
  test("finds .git folders and files at any depth, not the root's own", () => {
    const r = root("depth");
    gitDir(r);
    const found: string[] = [];
    let d = r;
    for (let level = 1; level <= 12; level++) {
      d = join(d, `l${level}`);
      found.push(gitDir(d));
    }
    expect(nestedGitPaths(r, [r]).sort()).toEqual(found.sort());
  });

  test("never enters node_modules or .git, never follows a symlink; a .git symlink gives nothing", () => {
    const r = root("skips");
    gitDir(join(r, "node_modules", "dep"));
    gitDir(join(r, "proj", ".git", "modules", "x"));
    const elsewhere = root("skips-target");
    gitDir(join(elsewhere, "repo"));
    symlinkSync(elsewhere, join(r, "link"));
    mkdirSync(join(r, "linked"));
    symlinkSync(join(elsewhere, "repo", ".git"), join(r, "linked", ".git"));
    expect(nestedGitPaths(r, [r])).toEqual([join(r, "proj", ".git")]);
  });

  test("the working folder's repository is found, at any depth", () => {
    const r = root("workdir");
    const deep = join(r, "a", "b", "c", "d", "e", "repo");
    const g = gitDir(deep);
    mkdirSync(join(deep, "src"));
    expect(nestedGitPaths(r, [r])).toEqual([g]);
    expect(nestedGitPaths(r, [r], join(deep, "src"))).toEqual([g]);
  });

  test("a .git file: the file, and the gitdir it points at only when that is a git dir inside a root holding no root", () => {
    const r = root("pointer");
    const real = gitDir(join(r, "store", "a", "b", "wt")); // deeper than the search: found through the pointer only
    mkdirSync(join(r, "wt"));
    writeFileSync(join(r, "wt", ".git"), `gitdir: ${real}\n`);
    expect(nestedGitPaths(r, [r]).sort()).toEqual([real, join(r, "wt", ".git")].sort());
    // A pointer at the root itself, at a folder without HEAD, or outside every root: only the file.
    for (const [name, target] of [
      ["self", r],
      ["nohead", join(r, "store")],
      ["outside", "/etc"],
    ] as const) {
      const p = root(`pointer-${name}`);
      mkdirSync(join(p, "x"));
      writeFileSync(join(p, "x", ".git"), `gitdir: ${target}\n`);
      expect(nestedGitPaths(p, [p, r])).toEqual([join(p, "x", ".git")]);
    }
  });

  test("legacy plans list nested repositories only when asked (bubblewrap), never for Landlock or Seatbelt", () => {
    const r = root("plan");
    const g = gitDir(join(r, "sub"));
    const policy = parseSandboxPolicy({ type: "workspace-write", exclude_slash_tmp: true, exclude_tmpdir_env_var: true });
    expect(planSandboxPolicy(policy, r, {}).writableRoots[0]!.readOnlySubpaths).not.toContain(g);
    expect(planSandboxPolicy(policy, r, {}, {}).writableRoots[0]!.readOnlySubpaths).toContain(g);
  });
});

describe("protected config folders", () => {
  const policy = parseSandboxPolicy({ type: "workspace-write", exclude_slash_tmp: true, exclude_tmpdir_env_var: true });

  test("an existing CODEX_HOME below a root is a read-only subpath; Landlock refuses the plan with the reason", () => {
    const r = root("ch-exists");
    const home = join(r, "home", ".codex");
    mkdirSync(home, { recursive: true });
    setProtectedConfigDirs([home]);
    expect(configCarveOuts(r)).toEqual([home]);
    const plan = planSandboxPolicy(policy, r, {});
    expect(plan.writableRoots[0]!.readOnlySubpaths).toContain(home);
    expect(landlockCanEnforce(plan)).toContain(`contains ${home}`);
  });

  test("a missing one: its first missing component is the carve-out (so it cannot be created)", () => {
    const r = root("ch-missing");
    setProtectedConfigDirs([join(r, "home", ".codex")]);
    expect(configCarveOuts(r)).toEqual([join(r, "home")]);
    mkdirSync(join(r, "home"));
    expect(configCarveOuts(r)).toEqual([join(r, "home", ".codex")]);
  });

  test("a root inside CODEX_HOME is dropped (legacy and profile plans); unrelated roots are untouched", () => {
    const home = root("ch-inside");
    const inner = join(home, "rules");
    mkdirSync(inner);
    const other = root("ch-other");
    setProtectedConfigDirs([home]);
    expect(rootInConfigDir(inner)).toBe(home);
    const legacy = planSandboxPolicy(
      parseSandboxPolicy({ type: "workspace-write", writable_roots: [inner], exclude_slash_tmp: true, exclude_tmpdir_env_var: true }),
      other,
      {},
    );
    expect(legacy.writableRoots.map((w) => w.root)).toEqual([other]);
    const profile = planPermissionProfile(
      {
        type: "managed",
        fileSystem: {
          type: "restricted",
          entries: [
            { path: { type: "special", value: { kind: "root" } }, access: "read" },
            { path: { type: "path", path: inner }, access: "write" },
            { path: { type: "path", path: other }, access: "write" },
          ],
        },
        network: "restricted",
      },
      other,
    );
    expect(profile.writableRoots.map((w) => w.root)).toEqual([other]);
    expect(landlockCanEnforce(profile)).toBeUndefined();
  });

  test("a symlink on the way to CODEX_HOME inside a root is listed as the link (so that bubblewrap and Landlock refuse)", () => {
    const r = root("ch-link");
    const real = root("ch-link-target");
    mkdirSync(join(r, "home"));
    symlinkSync(real, join(r, "home", ".codex"));
    setProtectedConfigDirs([join(r, "home", ".codex")]);
    expect(configCarveOuts(r)).toEqual([join(r, "home", ".codex")]);
    const plan = planSandboxPolicy(policy, r, {});
    expect(landlockCanEnforce(plan)).toContain(`contains ${join(r, "home", ".codex")}`);
    // The target's own root gets the target as a carve-out.
    expect(configCarveOuts(base)).toContain(real);
  });

  test("/etc/codex is always protected", () => {
    setProtectedConfigDirs([]);
    expect(configCarveOuts("/etc")).toEqual(["/etc/codex"]); // existing or not: /etc/codex is the first missing component
  });
});
