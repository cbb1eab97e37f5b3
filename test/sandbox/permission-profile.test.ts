/**
 * Permission profiles (Codex 0.169's `codex/sandbox-state` `permissionProfile`): parsing, `file://` URIs, and the
 * plan each profile maps onto, using the captured examples in test/fixtures/codex-0.169-tools-call-meta.json.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  parsePermissionProfile,
  pathFromUri,
  serializePermissionProfile,
  type PermissionProfile,
} from "../../src/sandbox/permission-profile.ts";
import {
  landlockCanEnforce,
  linuxReadableRoots,
  planPermissionProfile,
  planSandboxPolicy,
  summarySandboxPolicy,
} from "../../src/sandbox/filesystem-plan.ts";
import { parseSandboxPolicy } from "../../src/sandbox/policy.ts";
import { ShellmcpError } from "../../src/errors.ts";
import { canWrite } from "../../src/sandbox/writable.ts";
import { planWritableView } from "../../src/mcp/sandbox-state.ts";
import fixture from "../fixtures/codex-0.169-tools-call-meta.json";

let dir: string;
let proj: string;

/** The captured meta with `<proj>` replaced by a real folder. */
function captured(name: "workspace-write" | "danger-full-access"): Record<string, unknown> {
  const text = JSON.stringify(
    (fixture as unknown as Record<string, { _meta: Record<string, unknown> }>)[name]!._meta["codex/sandbox-state"],
  ).replaceAll("<proj>", proj);
  return JSON.parse(text);
}

function code(f: () => unknown): string | undefined {
  try {
    f();
  } catch (e) {
    if (e instanceof ShellmcpError) return `${e.code}: ${e.message}`;
    throw e;
  }
  return undefined;
}

const ROOT_READ = { path: { type: "special", value: { kind: "root" } }, access: "read" };
const managed = (entries: unknown[], network = "restricted") => ({
  type: "managed",
  file_system: { type: "restricted", entries },
  network,
});

beforeAll(() => {
  dir = realpathSync(mkdtempSync(join(tmpdir(), "shellmcp-pp-")));
  proj = join(dir, "proj");
  mkdirSync(join(proj, ".git"), { recursive: true });
  mkdirSync(join(proj, ".codex"));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("parsePermissionProfile", () => {
  test("the captured workspace-write profile", () => {
    const p = parsePermissionProfile(captured("workspace-write").permissionProfile);
    expect(p.type).toBe("managed");
    if (p.type !== "managed" || p.fileSystem.type !== "restricted") throw new Error("shape");
    expect(p.network).toBe("restricted");
    expect(p.fileSystem.entries).toHaveLength(6);
    expect(p.fileSystem.entries[0]).toEqual({ path: { type: "special", value: { kind: "root" } }, access: "read" });
    expect(p.fileSystem.entries[1]).toEqual({ path: { type: "path", path: proj }, access: "write" });
    expect(p.fileSystem.entries[5]).toEqual({
      path: { type: "path", path: join(proj, ".aws") },
      access: "read",
      missingPathBehavior: "skip",
    });
  });

  test("the captured danger-full-access profile", () => {
    expect(parsePermissionProfile(captured("danger-full-access").permissionProfile)).toEqual({ type: "disabled" });
  });

  test("every entry kind and access value round-trips through Codex's JSON", () => {
    const wire = {
      type: "managed",
      file_system: {
        type: "restricted",
        entries: [
          ROOT_READ,
          { path: { type: "special", value: { kind: "minimal" } }, access: "read" },
          { path: { type: "special", value: { kind: "project_roots", subpath: "sub" } }, access: "write" },
          { path: { type: "special", value: { kind: "project_roots" } }, access: "write" },
          { path: { type: "special", value: { kind: "tmpdir" } }, access: "write" },
          { path: { type: "special", value: { kind: "slash_tmp" } }, access: "write" },
          { path: { type: "path", path: "/secret" }, access: "deny" },
          { path: { type: "glob_pattern", pattern: "**/*.env" }, access: "deny" },
          { path: { type: "path", path: "/p/.git" }, access: "read", missing_path_behavior: "skip" },
        ],
        glob_scan_max_depth: 3,
      },
      network: "enabled",
    };
    const p = parsePermissionProfile(JSON.stringify(wire));
    expect(JSON.parse(serializePermissionProfile(p))).toEqual(wire);
    expect(parsePermissionProfile({ type: "external", network: "enabled" })).toEqual({ type: "external", network: "enabled" });
    expect(parsePermissionProfile({ type: "managed", file_system: { type: "unrestricted" }, network: "restricted" })).toEqual({
      type: "managed",
      fileSystem: { type: "unrestricted" },
      network: "restricted",
    });
  });

  test("aliases: access none = deny, current_working_directory = project_roots, file:// paths", () => {
    const p = parsePermissionProfile(
      managed([
        { path: { type: "path", path: "file:///a%20b/c" }, access: "none" },
        { path: { type: "special", value: { kind: "current_working_directory" } }, access: "write" },
      ]),
    ) as Extract<PermissionProfile, { type: "managed" }>;
    if (p.fileSystem.type !== "restricted") throw new Error("shape");
    expect(p.fileSystem.entries[0]).toEqual({ path: { type: "path", path: "/a b/c" }, access: "deny" });
    expect(p.fileSystem.entries[1]!.path).toEqual({ type: "special", value: { kind: "project_roots" } });
  });

  test("bad input is refused with a message naming the problem", () => {
    expect(code(() => parsePermissionProfile({ type: "bogus" }))).toContain('unknown type "bogus"');
    expect(code(() => parsePermissionProfile("{"))).toContain("not JSON");
    expect(code(() => parsePermissionProfile(managed([{ ...ROOT_READ, access: "execute" }])))).toContain("access must be");
    expect(code(() => parsePermissionProfile(managed([{ path: { type: "path", path: "rel" }, access: "write" }])))).toContain(
      "absolute path",
    );
    expect(code(() => parsePermissionProfile(managed([{ path: { type: "path", path: "http://x/y" }, access: "write" }])))).toContain(
      "file:// URI",
    );
    expect(code(() => parsePermissionProfile(managed([{ path: { type: "path", path: "file://host/y" }, access: "write" }])))).toContain(
      "remote host",
    );
    expect(code(() => parsePermissionProfile(managed([{ ...ROOT_READ, missing_path_behavior: "error" }])))).toContain(
      "missing_path_behavior",
    );
    expect(code(() => parsePermissionProfile(managed([{ ...ROOT_READ, acess: "read" }])))).toContain("unknown field `acess`");
    expect(code(() => parsePermissionProfile({ ...managed([]), network: "on" }))).toContain("network");
    expect(
      code(() =>
        parsePermissionProfile(
          managed([{ path: { type: "special", value: { kind: "project_roots", subpath: "../x" } }, access: "write" }]),
        ),
      ),
    ).toContain("subpath");
    expect(code(() => parsePermissionProfile({ type: "managed", file_system: { type: "x" }, network: "restricted" }))).toContain(
      "file_system type",
    );
  });
});

describe("pathFromUri", () => {
  test("file URIs and absolute paths", () => {
    expect(pathFromUri("file:///proj", "sandboxCwd")).toBe("/proj");
    expect(pathFromUri("file://localhost/p%C3%A9/x", "sandboxCwd")).toBe("/pé/x");
    expect(pathFromUri("/a/../b", "sandboxCwd")).toBe("/b");
    expect(code(() => pathFromUri("relative", "sandboxCwd"))).toContain("absolute");
  });
});

describe("planPermissionProfile", () => {
  test("captured workspace-write: the project writable, .git/.agents/.codex/.aws read-only (missing ones too), no network", () => {
    const state = captured("workspace-write");
    const plan = planPermissionProfile(parsePermissionProfile(state.permissionProfile), state.sandboxCwd as string, {});
    expect(plan).toEqual({
      sandboxed: true,
      fullRead: true,
      fullWrite: false,
      readableRoots: [],
      includePlatformDefaults: false,
      writableRoots: [{ root: proj, readOnlySubpaths: [".git", ".agents", ".codex", ".aws"].map((n) => join(proj, n)) }],
      deniedPaths: [],
      network: "restricted",
      strict: true,
      hidden: { stores: [], secrets: [] }, // a fresh HOME: no credential store, no secret (src/sandbox/secrets.ts)
    });
    // Landlock runs it as serve runs a legacy policy (issue 44): .git/.agents/.codex left writable (the git guard
    // repairs .git), the missing .aws has nothing to keep.
    expect(landlockCanEnforce(plan)).toBeUndefined();
    expect(summarySandboxPolicy(plan)).toEqual({
      type: "workspace-write",
      writable_roots: [proj],
      read_only_access: { type: "full-access" },
      network_access: false,
      exclude_tmpdir_env_var: true,
      exclude_slash_tmp: true,
    });
  });

  test("captured workspace-write under Landlock: an existing .aws (not a protected name) is refused", () => {
    const state = captured("workspace-write");
    mkdirSync(join(proj, ".aws"), { recursive: true });
    try {
      const plan = planPermissionProfile(parsePermissionProfile(state.permissionProfile), state.sandboxCwd as string, {});
      expect(landlockCanEnforce(plan)).toBe(
        `the permission profile keeps ${join(proj, ".aws")} read-only inside the writable ${proj}, which Landlock cannot enforce: use the bubblewrap backend (install bubblewrap, or --sandbox-backend bwrap)`,
      );
    } finally {
      rmSync(join(proj, ".aws"), { recursive: true });
    }
  });

  test("captured danger-full-access: no sandbox", () => {
    const state = captured("danger-full-access");
    const plan = planPermissionProfile(parsePermissionProfile(state.permissionProfile), state.sandboxCwd as string);
    expect(plan.sandboxed).toBe(false);
    expect(summarySandboxPolicy(plan)).toEqual({ type: "danger-full-access" });
  });

  test("read-only: root read only", () => {
    const plan = planPermissionProfile(parsePermissionProfile(managed([ROOT_READ])), proj);
    expect(plan.fullRead && !plan.fullWrite && plan.writableRoots.length === 0).toBe(true);
    expect(summarySandboxPolicy(plan)).toEqual({ type: "read-only", access: { type: "full-access" }, network_access: false });
    expect(landlockCanEnforce(plan)).toBeUndefined();
  });

  test("special paths: project_roots (+subpath), tmpdir, slash_tmp, minimal", () => {
    const tmp = join(dir, "t");
    mkdirSync(tmp, { recursive: true });
    mkdirSync(join(proj, "sub"), { recursive: true });
    const plan = planPermissionProfile(
      parsePermissionProfile(
        managed(
          [
            { path: { type: "special", value: { kind: "minimal" } }, access: "read" },
            { path: { type: "special", value: { kind: "project_roots", subpath: "sub" } }, access: "write" },
            { path: { type: "special", value: { kind: "tmpdir" } }, access: "write" },
            { path: { type: "special", value: { kind: "slash_tmp" } }, access: "write" },
            { path: { type: "path", path: "/usr" }, access: "read" },
          ],
          "enabled",
        ),
      ),
      `file://${proj}`,
      { TMPDIR: tmp },
    );
    expect(plan.fullRead).toBe(false);
    expect(plan.includePlatformDefaults).toBe(true);
    expect(plan.writableRoots.map((w) => w.root)).toEqual(
      [realpathSync("/tmp"), tmp, join(proj, "sub")].sort((a, b) => a.split("/").length - b.split("/").length),
    );
    expect(plan.readableRoots).toEqual(["/usr"]);
    expect(plan.network).toBe("enabled");
    const roots = linuxReadableRoots(plan, [])!;
    expect(roots).toContain("/usr");
    expect(roots).toContain("/etc");
    expect(roots).toContain(join(proj, "sub"));
    expect(roots).not.toContain(proj);
  });

  test("most specific entry wins; deny beats write beats read for the same path", () => {
    mkdirSync(join(proj, "secret"), { recursive: true });
    writeFileSync(join(proj, "key.pem"), "k");
    const plan = planPermissionProfile(
      parsePermissionProfile(
        managed([
          ROOT_READ,
          { path: { type: "path", path: proj }, access: "write" },
          { path: { type: "path", path: proj }, access: "read" },
          { path: { type: "path", path: join(proj, "secret") }, access: "write" },
          { path: { type: "path", path: join(proj, "secret") }, access: "none" },
          { path: { type: "path", path: join(proj, "key.pem") }, access: "deny" },
          { path: { type: "path", path: "/nonexistent-shellmcp-x" }, access: "deny" },
        ]),
      ),
      proj,
    );
    expect(plan.writableRoots).toEqual([{ root: proj, readOnlySubpaths: [] }]);
    expect(plan.deniedPaths.sort()).toEqual([join(proj, "key.pem"), join(proj, "secret")].sort());
    expect(landlockCanEnforce(plan)).toContain("denies");
  });

  test("a missing deny inside a writable root is kept (its creation must be blocked); elsewhere it is dropped", () => {
    const plan = planPermissionProfile(
      parsePermissionProfile(
        managed([
          ROOT_READ,
          { path: { type: "path", path: proj }, access: "write" },
          { path: { type: "path", path: join(proj, ".env") }, access: "deny", missing_path_behavior: "skip" },
          { path: { type: "path", path: "/no/such/place" }, access: "deny" },
          { path: { type: "path", path: "/no/such/root" }, access: "write" },
        ]),
      ),
      proj,
    );
    expect(plan.deniedPaths).toEqual([join(proj, ".env")]);
    expect(plan.writableRoots.map((w) => w.root)).toEqual([proj]);
  });

  test("symlinked paths are resolved", () => {
    const link = join(dir, "link-to-proj");
    symlinkSync(proj, link);
    const plan = planPermissionProfile(
      parsePermissionProfile(managed([ROOT_READ, { path: { type: "path", path: link }, access: "write" }])),
      link,
    );
    expect(plan.writableRoots[0]!.root).toBe(proj);
  });

  test("a protected path that is a symlink stays a symlink in the plan (the backend refuses it), grants follow links", () => {
    const target = join(dir, "elsewhere");
    mkdirSync(target, { recursive: true });
    const p2 = join(dir, "proj2");
    mkdirSync(p2, { recursive: true });
    symlinkSync(target, join(p2, ".git"));
    const plan = planPermissionProfile(
      parsePermissionProfile(
        managed([
          ROOT_READ,
          { path: { type: "path", path: p2 }, access: "write" },
          { path: { type: "path", path: join(p2, ".git") }, access: "read", missing_path_behavior: "skip" },
        ]),
      ),
      p2,
    );
    expect(plan.writableRoots).toEqual([{ root: p2, readOnlySubpaths: [join(p2, ".git")] }]);
  });

  test("external and unrestricted: full write, network as given", () => {
    for (const p of [
      { type: "external", network: "restricted" },
      { type: "managed", file_system: { type: "unrestricted" }, network: "restricted" },
    ]) {
      const plan = planPermissionProfile(parsePermissionProfile(p), proj);
      expect(plan.sandboxed && plan.fullWrite && plan.fullRead).toBe(true);
      expect(summarySandboxPolicy(plan)).toEqual({ type: "external-sandbox", network_access: "restricted" });
    }
  });

  test("what cannot be enforced fails closed", () => {
    const plan = (entries: unknown[]) => code(() => planPermissionProfile(parsePermissionProfile(managed(entries)), proj));
    expect(plan([ROOT_READ, { path: { type: "glob_pattern", pattern: "**/*.env" }, access: "deny" }])).toContain(
      "SANDBOX_UNAVAILABLE: cannot enforce permission profile entry",
    );
    expect(plan([ROOT_READ, { path: { type: "special", value: { kind: "future_thing" } }, access: "read" }])).toContain(
      "unknown special path kind `future_thing`",
    );
    expect(
      plan([
        { ...ROOT_READ, access: "write" },
        { path: { type: "path", path: join(proj, ".git") }, access: "read" },
      ]),
    ).toContain("SANDBOX_UNAVAILABLE");
    expect(plan([{ path: { type: "special", value: { kind: "minimal" } }, access: "write" }])).toContain("SANDBOX_UNAVAILABLE");
    // An unknown kind on a write entry only narrows: dropped.
    expect(
      planPermissionProfile(
        parsePermissionProfile(managed([ROOT_READ, { path: { type: "special", value: { kind: "future_thing" } }, access: "write" }])),
        proj,
      ).writableRoots,
    ).toEqual([]);
  });
});

describe("planSandboxPolicy (legacy)", () => {
  test("workspace-write gives the same roots as before, not strict", () => {
    const plan = planSandboxPolicy(
      parseSandboxPolicy({ type: "workspace-write", exclude_slash_tmp: true, exclude_tmpdir_env_var: true }),
      proj,
      {},
    );
    expect(plan.writableRoots).toEqual([{ root: proj, readOnlySubpaths: [join(proj, ".git"), join(proj, ".codex")] }]);
    expect(plan.strict).toBe(false);
    expect(landlockCanEnforce(plan)).toBeUndefined();
  });

  test("restricted reads keep their roots and platform-defaults flag", () => {
    const plan = planSandboxPolicy(
      parseSandboxPolicy({ type: "read-only", access: { type: "restricted", include_platform_defaults: true, readable_roots: ["/usr"] } }),
      proj,
      {},
    );
    expect(plan.fullRead).toBe(false);
    expect(plan.includePlatformDefaults).toBe(true);
    expect(plan.readableRoots).toEqual(["/usr", proj]);
  });

  test("danger-full-access and external-sandbox", () => {
    expect(planSandboxPolicy({ type: "danger-full-access" }, proj).sandboxed).toBe(false);
    const ext = planSandboxPolicy({ type: "external-sandbox", network_access: "enabled" }, proj);
    expect(ext.fullWrite && ext.network === "enabled").toBe(true);
  });
});

describe("planWritableView (what the escalation boundary may trust)", () => {
  test("carve-outs and denied paths are read-only only where bubblewrap enforces them; without a carve-out .git is writable", () => {
    const withCarveOuts = planPermissionProfile(
      parsePermissionProfile(
        managed([
          ROOT_READ,
          { path: { type: "path", path: proj }, access: "write" },
          { path: { type: "path", path: join(proj, ".git") }, access: "read" },
          { path: { type: "path", path: join(proj, "key.pem") }, access: "deny" },
        ]),
      ),
      proj,
    );
    const bwrap = planWritableView(withCarveOuts, "bwrap");
    expect(canWrite(bwrap, join(proj, "src.c"))).toBe(true);
    expect(canWrite(bwrap, join(proj, ".git", "hooks", "pre-commit"))).toBe(false);
    expect(canWrite(bwrap, join(proj, "key.pem"))).toBe(false);
    expect(canWrite(bwrap, "/etc/passwd")).toBe(false);
    expect(canWrite(planWritableView(withCarveOuts, "landlock"), join(proj, ".git", "config"))).toBe(true);
    // A profile without a .git carve-out leaves .git writable, and the view must say so (the legacy policy would not).
    const bare = planPermissionProfile(
      parsePermissionProfile(managed([ROOT_READ, { path: { type: "path", path: proj }, access: "write" }])),
      proj,
    );
    expect(canWrite(planWritableView(bare, "bwrap"), join(proj, ".git", "config"))).toBe(true);
    expect(planWritableView(planPermissionProfile({ type: "disabled" }, proj), "bwrap").full).toBe(true);
    expect(planWritableView(planPermissionProfile({ type: "external", network: "restricted" }, proj), "landlock").full).toBe(true);
  });
});
