/**
 * Codex's sandbox state both ways: 0.97's `codex/sandbox-state/update` (session state) and 0.169's per-call
 * `params._meta["codex/sandbox-state"]` permission profile (that call only, winning over the session's). Unit
 * tests of src/mcp/sandbox-state.ts, then the compiled `shellmcp serve` driven by the MCP SDK client with the
 * `_meta` Codex 0.169 sends (test/fixtures/codex-0.169-tools-call-meta.json).
 */
import { CONF_BASE } from "../helpers/cleanup.ts";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readFileSync, symlinkSync, unlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ShellmcpError } from "../../src/errors.ts";
import { parseSandboxState, sandboxStateFromMeta } from "../../src/mcp/sandbox-state.ts";
import fixture from "../fixtures/codex-0.169-tools-call-meta.json";
import { startServe, type Session } from "../helpers/mcp.ts";
import { shellsMissing } from "../helpers/shells.ts";
import { skipWithout } from "../helpers/prereq.ts";

const base = join(CONF_BASE, `sandbox-state-${Math.random().toString(36).slice(2)}`);
const proj = join(base, "proj");
const outside = join(base, "outside");

/** The `_meta` Codex 0.169 sent for `name`, with `<proj>` replaced by our project. */
function meta(name: "workspace-write" | "danger-full-access"): Record<string, unknown> {
  const f = fixture as unknown as Record<string, { _meta: Record<string, unknown> }>;
  return JSON.parse(JSON.stringify(f[name]!._meta).replaceAll("<proj>", proj));
}

/** A `_meta` carrying `profile` as Codex 0.169 does. */
function profileMeta(profile: unknown, extra: Record<string, unknown> = {}): Record<string, unknown> {
  const state = { permissionProfile: profile, sandboxCwd: `file://${proj}`, useLegacyLandlock: false, useMxc: false, ...extra };
  return { "codex/sandbox-state": state, "codex/sandbox-state-meta": state };
}

const ROOT_READ = { path: { type: "special", value: { kind: "root" } }, access: "read" };

beforeAll(() => {
  mkdirSync(join(proj, ".git"), { recursive: true });
  mkdirSync(outside, { recursive: true });
  writeFileSync(join(proj, "secret.txt"), "s3cret\n");
});

describe("parseSandboxState / sandboxStateFromMeta", () => {
  test("0.97's update params", () => {
    const s = parseSandboxState({
      sandboxPolicy: { type: "workspace-write" },
      sandboxCwd: "/p",
      codexLinuxSandboxExe: "/x/codex",
      useLinuxSandboxBwrap: true,
    });
    expect(s.policy.type).toBe("workspace-write");
    expect(s.profile).toBeUndefined();
    expect(s).toMatchObject({ sandboxCwd: "/p", codexLinuxSandboxExe: "/x/codex", useBwrap: true, useLegacyLandlock: false });
    expect(() => parseSandboxState({ sandboxPolicy: { type: "read-only" } })).toThrow("missing field `sandboxCwd`");
    expect(() => parseSandboxState({ sandboxCwd: "/p" })).toThrow("missing field `sandboxPolicy`");
    expect(() => parseSandboxState({ sandboxPolicy: { type: "read-only" }, sandboxCwd: "/p", useLinuxSandboxBwrap: null })).toThrow(
      "useLinuxSandboxBwrap",
    );
  });

  test("0.169's per-call state: the copy is used when the main key is absent, the launcher fills in the exe", () => {
    const m = meta("workspace-write");
    const s = sandboxStateFromMeta(m)!;
    expect(s.profile?.type).toBe("managed");
    expect(s.sandboxCwd).toBe(proj);
    expect(s.policy).toMatchObject({ type: "workspace-write", writable_roots: [proj], network_access: false });
    expect(s.codexLinuxSandboxExe).toBe("<codex-0.169.0-linux-x64>/codex");
    const copyOnly = { ...m, "codex/sandbox-state": undefined };
    expect(sandboxStateFromMeta(copyOnly)!.profile).toEqual(s.profile);
    const noExe = JSON.parse(JSON.stringify(m));
    delete noExe["codex/sandbox-state"].codexLinuxSandboxExe;
    noExe["codex/sandbox-launcher"].codexExecutable = "/l/codex";
    expect(sandboxStateFromMeta(noExe)!.codexLinuxSandboxExe).toBe("/l/codex");
    expect(sandboxStateFromMeta(meta("danger-full-access"))!.policy).toEqual({ type: "danger-full-access" });
  });

  test("no state in _meta → undefined (the session's applies); a malformed one → an error, never a fallback", () => {
    expect(sandboxStateFromMeta(undefined)).toBeUndefined();
    expect(sandboxStateFromMeta({ progressToken: 1 })).toBeUndefined();
    let err: unknown;
    try {
      sandboxStateFromMeta(
        profileMeta({
          type: "managed",
          file_system: { type: "restricted", entries: [{ ...ROOT_READ, access: "everything" }] },
          network: "restricted",
        }),
      );
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ShellmcpError);
    expect((err as Error).message).toContain('invalid _meta["codex/sandbox-state"]');
  });
});

const skip = skipWithout("serve with per-call sandbox state", shellsMissing());

describe.skipIf(skip)("serve applies the per-call sandbox state", () => {
  let s: Session;
  beforeAll(async () => {
    s = await startServe({});
  });
  afterAll(async () => {
    await s?.close();
  });

  const call = async (command: string, _meta?: Record<string, unknown>) => {
    const raw = (await s.client.callTool(
      { name: "shell", arguments: { command, workdir: proj, login: false }, ...(_meta ? { _meta } : {}) },
      undefined,
      { timeout: 60_000 },
    )) as { content: { text: string }[]; isError?: boolean };
    const text = raw.content[0]!.text;
    let out: { exit_code: number; output: string } | undefined;
    try {
      out = JSON.parse(text);
    } catch {
      out = undefined;
    }
    return { text, out, isError: raw.isError === true };
  };

  test("Codex 0.169's workspace-write _meta: the project is writable for that call, .git/.aws/.codex and outside are not", async () => {
    const r = await call(
      `touch a && echo A_OK; touch .git/x || echo GIT_RO; mkdir .aws || echo AWS_RO; mkdir .codex || echo CODEX_RO; touch ${outside}/x || echo OUT_RO`,
      meta("workspace-write"),
    );
    expect(r.out!.output).toContain("A_OK");
    for (const m of ["GIT_RO", "AWS_RO", "CODEX_RO", "OUT_RO"]) expect(r.out!.output).toContain(m);
    expect(existsSync(join(proj, "a"))).toBe(true);
    expect(existsSync(join(proj, ".aws"))).toBe(false);
    expect(existsSync(join(proj, ".codex"))).toBe(false);
    expect(existsSync(join(outside, "x"))).toBe(false);
  });

  test("the next call without _meta is back to the session's state (read-only by default)", async () => {
    const r = await call("touch b || echo B_RO");
    expect(r.out!.output).toContain("B_RO");
    expect(existsSync(join(proj, "b"))).toBe(false);
  });

  test("danger-full-access _meta: no sandbox for that call", async () => {
    const r = await call(`touch ${outside}/y && echo Y_OK`, meta("danger-full-access"));
    expect(r.out!.output).toContain("Y_OK");
    expect(existsSync(join(outside, "y"))).toBe(true);
  });

  test("per-call state wins over 0.97's session state, which keeps working without _meta", async () => {
    expect(await s.sandboxState({ type: "danger-full-access" }, proj)).toEqual({});
    const narrowed = await call(
      `touch ${outside}/z || echo Z_RO`,
      profileMeta({ type: "managed", file_system: { type: "restricted", entries: [ROOT_READ] }, network: "restricted" }),
    );
    expect(narrowed.out!.output).toContain("Z_RO");
    expect(existsSync(join(outside, "z"))).toBe(false);
    const session = await call(`touch ${outside}/z && echo Z_OK`);
    expect(session.out!.output).toContain("Z_OK");
    expect(await s.sandboxState({ type: "read-only" }, proj)).toEqual({});
  });

  test("a denied file is unreadable, a network-enabled profile still confines writes", async () => {
    const r = await call(
      "cat secret.txt || echo SECRET_HIDDEN; touch c && echo C_OK",
      profileMeta({
        type: "managed",
        file_system: {
          type: "restricted",
          entries: [
            ROOT_READ,
            { path: { type: "path", path: proj }, access: "write" },
            { path: { type: "path", path: join(proj, "secret.txt") }, access: "none" },
          ],
        },
        network: "enabled",
      }),
    );
    expect(r.out!.output).not.toContain("s3cret");
    expect(r.out!.output).toContain("Permission denied");
    expect(r.out!.output).toContain("SECRET_HIDDEN");
    expect(r.out!.output).toContain("C_OK");
    expect(readFileSync(join(proj, "secret.txt"), "utf8")).toBe("s3cret\n");
  });

  test("a protected path that is a symlink (a command could re-point it) is refused, nothing runs", async () => {
    const target = join(base, "aws-target");
    mkdirSync(target, { recursive: true });
    symlinkSync(target, join(proj, ".aws"));
    try {
      const r = await call(`touch sym-ran; touch ${target}/x`, meta("workspace-write"));
      expect(r.isError).toBe(true);
      expect(r.text).toContain("crosses writable symlink");
      expect(existsSync(join(proj, "sym-ran"))).toBe(false);
      expect(existsSync(join(target, "x"))).toBe(false);
    } finally {
      unlinkSync(join(proj, ".aws"));
    }
  });

  test("what cannot be enforced is refused in the result, and nothing runs", async () => {
    const glob = await call(
      "touch glob-ran",
      profileMeta({
        type: "managed",
        file_system: { type: "restricted", entries: [ROOT_READ, { path: { type: "glob_pattern", pattern: "**/*.env" }, access: "deny" }] },
        network: "restricted",
      }),
    );
    expect(glob.isError).toBe(true);
    expect(glob.text).toContain("glob_pattern entries are not supported");
    const landlock = await call("touch landlock-ran", {
      ...meta("workspace-write"),
      "codex/sandbox-state": { ...(meta("workspace-write")["codex/sandbox-state"] as object), useLegacyLandlock: true },
    });
    // Codex's legacy Landlock runs the workspace-write profile as serve runs a legacy policy (issue 44).
    expect(landlock.text).not.toContain("Landlock cannot enforce");
    expect(existsSync(join(proj, "landlock-ran"))).toBe(true);
    const bad = await call("touch bad-ran", profileMeta({ type: "managed" }));
    expect(bad.isError).toBe(true);
    expect(bad.text).toContain("file_system");
    for (const f of ["glob-ran", "bad-ran"]) expect(existsSync(join(proj, f))).toBe(false);
  });
});
