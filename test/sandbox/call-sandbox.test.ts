/**
 * The call's sandbox as one object (issue 33, part A): what `BackendChoice.forCall` (src/serve/backend.ts) chooses
 * for each situation, and what the `CallSandbox` (src/sandbox/backend.ts) answers its consumers — the enforcing
 * mechanism, proxy mode's wiring, the weaker-protection reason, the escalation room's backend, the writable view —
 * without any helper flag read back. The argv themselves are pinned by test/unit/golden-launch-argv.test.ts.
 * Pure: bubblewrap's preflight is a counted fake, the workspace a fixture folder — except the last part, which runs
 * the call's own sandbox and checks its writable view against the kernel.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { SandboxState } from "../../src/mcp/sandbox-state.ts";
import { CallSandbox, NO_SANDBOX } from "../../src/sandbox/backend.ts";
import type { BwrapProbe } from "../../src/sandbox/linux/bwrap.ts";
import { parsePermissionProfile } from "../../src/sandbox/permission-profile.ts";
import { parseSandboxPolicy, type SandboxPolicy } from "../../src/sandbox/policy.ts";
import { protectedConfigDirs, setProtectedConfigDirs } from "../../src/sandbox/protected-config.ts";
import { BackendChoice, type CallContext } from "../../src/serve/backend.ts";
import { selfExePath } from "../../src/self.ts";
import { landlockAbi } from "../../src/sandbox/linux/landlock.ts";
import { ensureBinary } from "../helpers/binary.ts";
import { skipWithout, toolMissing } from "../helpers/prereq.ts";
import { describe as describeOutcome, HELPER, isFailure, runCall, type Backend } from "../security/differential/harness.ts";
import type { Probe } from "../security/differential/layout.ts";

const root = realpathSync(mkdtempSync(join(tmpdir(), "call-sandbox-")));
const ws = join(root, "ws");
const codexHome = join(root, "codex-home");
for (const d of [ws, join(ws, ".git"), join(root, "tmp"), codexHome]) mkdirSync(d, { recursive: true });
const env = { TMPDIR: join(root, "tmp"), PATH: "/usr/bin:/bin" };
const saved = protectedConfigDirs();
setProtectedConfigDirs([codexHome]);
afterAll(() => {
  setProtectedConfigDirs(saved);
  rmSync(root, { recursive: true, force: true });
});

const WW = parseSandboxPolicy({ type: "workspace-write", exclude_slash_tmp: true });
const ctx: CallContext = { platform: "linux", helperExe: selfExePath(), env };

/** A server's choice with a preflight that answers `probe` and counts its runs. */
function choice(kind: string, probe: BwrapProbe): { backend: BackendChoice; probes: () => number } {
  let n = 0;
  const backend = new BackendChoice(kind, [codexHome], () => {
    n++;
    return probe;
  });
  return { backend, probes: () => n };
}

function state(policy: SandboxPolicy, extra: Partial<SandboxState> = {}): SandboxState {
  return { policy, sandboxCwd: ws, useBwrap: false, useLegacyLandlock: false, ...extra };
}

function call(c: BackendChoice, s: SandboxState, x: Partial<CallContext> = {}): CallSandbox {
  const r = c.forCall(s, ws, { ...ctx, ...x });
  if (!(r instanceof CallSandbox)) throw new Error(`refused: ${r.refused}`);
  return r;
}

describe("BackendChoice.forCall", () => {
  test("bubblewrap found: our helper's bubblewrap, started directly; bridged proxy; bubblewrap rooms with that bwrap", () => {
    const { backend, probes } = choice("auto", { ok: true, path: "/usr/bin/bwrap", noProc: true });
    const c = call(backend, state(WW));
    expect([c.backend.kind, c.enforcement, c.backend.proxyWiring, c.backend.landlockWhy]).toEqual(["bwrap", "bwrap", "bridge", undefined]);
    expect(c.backend.room(c, { allowLocalBinding: false })).toEqual({ kind: "bwrap", bwrap: "/usr/bin/bwrap", noProc: true });
    call(backend, state(WW));
    expect(probes()).toBe(1); // the preflight runs once per server
  });

  test("bubblewrap missing: Landlock with the preflight's reason; loopback proxy; Landlock rooms built by our helper", () => {
    const { backend } = choice("auto", { ok: false, reason: "bubblewrap is not installed" });
    const c = call(backend, state(WW));
    expect([c.backend.kind, c.enforcement, c.backend.proxyWiring]).toEqual(["landlock", "landlock", "loopback"]);
    expect(c.backend.landlockWhy).toBe("bubblewrap unavailable: bubblewrap is not installed");
    expect(c.backend.room(c, { allowLocalBinding: false })).toEqual({
      kind: "landlock",
      // Every folder no sandbox may write (CODEX_HOME, /etc/codex): the room's helper refuses a root inside one.
      helper: [selfExePath(), "--codex-run-as-linux-sandbox", ...protectedConfigDirs().flatMap((d) => ["--protected-config-dir", d])],
    });
  });

  test("bubblewrap installed but user namespaces refused: the notice's advice says so instead of installing bubblewrap", () => {
    const refused = (usernsRefused?: "container" | "host") =>
      call(
        choice("auto", { ok: false, path: "/usr/bin/bwrap", reason: "bubblewrap cannot create its sandbox", usernsRefused }).backend,
        state(WW),
      ).backend.landlockFix;
    expect(refused("container")).toContain("this container or pod refuses new user namespaces");
    expect(refused("host")).toContain("this host refuses unprivileged user namespaces");
    expect(refused()).toBeUndefined(); // the notice's default: install bubblewrap
  });

  test("Codex's helper: its enforcement follows useLinuxSandboxBwrap; proxy mode unsupported; its own Landlock rooms", () => {
    const { backend } = choice("auto", { ok: true, path: "/usr/bin/bwrap" });
    const exe = "/opt/codex/codex-linux-sandbox";
    const codex = (useBwrap: boolean) =>
      call(backend, state(WW, { codexLinuxSandboxExe: exe, useBwrap }), { useCodexLinuxSandboxExe: true });
    const landlock = codex(false);
    expect([landlock.backend.kind, landlock.enforcement, landlock.backend.proxyWiring]).toEqual([
      "codex-helper",
      "landlock",
      "unsupported",
    ]);
    expect(landlock.backend.landlockWhy).toBe("Codex's own sandbox helper without bubblewrap");
    expect(landlock.backend.room(landlock, { allowLocalBinding: false })).toEqual({
      kind: "landlock",
      helper: [exe, ...protectedConfigDirs().flatMap((d) => ["--protected-config-dir", d])],
    });
    expect(codex(true).enforcement).toBe("bwrap");
    // Without --use-codex-linux-sandbox-exe the client's helper is not used.
    expect(call(backend, state(WW, { codexLinuxSandboxExe: exe })).backend.kind).toBe("bwrap");
  });

  test("the client's legacy Landlock for a profile: Landlock, and the notice says the client asked", () => {
    const { backend } = choice("auto", { ok: true, path: "/usr/bin/bwrap" });
    const profile = parsePermissionProfile({ type: "managed", network: "restricted", file_system: { type: "unrestricted" } });
    const c = call(backend, state(WW, { profile, useLegacyLandlock: true }));
    expect([c.backend.kind, c.backend.landlockWhy]).toEqual(["landlock", "the client asked for Codex's legacy Landlock sandbox"]);
  });

  test("danger-full-access: no sandbox, host rooms, everything writable", () => {
    const { backend } = choice("auto", { ok: true, path: "/usr/bin/bwrap" });
    const c = call(backend, state(parseSandboxPolicy({ type: "danger-full-access" })));
    expect(c.backend).toBe(NO_SANDBOX);
    expect([c.sandboxed, c.enforcement]).toEqual([false, "none"]);
    expect(c.writable()).toEqual({ full: true, roots: [], readOnly: [] });
    expect(c.launch({ shellPath: "/bin/sh", login: false, command: "true", wrapperPath: "/x" })).toEqual({
      argv: ["/bin/sh", "-c", "true", "sh"],
      sandboxed: false,
    });
  });

  test("Landlock refuses what it cannot enforce: CODEX_HOME inside a writable root", () => {
    const { backend } = choice("landlock", { ok: false, reason: "unused" });
    const r = backend.forCall(
      state(parseSandboxPolicy({ type: "workspace-write", writable_roots: [root], exclude_slash_tmp: true })),
      ws,
      ctx,
    );
    expect(r instanceof CallSandbox ? "chosen" : r.refused).toContain(codexHome);
  });

  test("bubblewrap failing after its preflight passed: the next call probes again", () => {
    const { backend, probes } = choice("auto", { ok: true, path: "/usr/bin/bwrap" });
    const c = call(backend, state(WW));
    expect(backend.bwrapFailed({ exitCode: 0, output: "bwrap: x" }, c)).toBeUndefined();
    expect(backend.bwrapFailed({ exitCode: 1, output: "bwrap: Creating new namespace failed\n" }, c)).toContain(
      "Creating new namespace failed",
    );
    call(backend, state(WW));
    expect(probes()).toBe(2);
  });
});

describe("CallSandbox", () => {
  test("the writable view is computed once; under Landlock nothing inside a root is read-only", () => {
    const { backend } = choice("auto", { ok: true, path: "/usr/bin/bwrap" });
    const c = call(backend, state(WW));
    const view = c.writable();
    expect(view.readOnly).toContain(join(ws, ".git"));
    expect(c.writable()).toBe(view);
    const landlock = call(choice("landlock", { ok: false }).backend, state(WW));
    expect(landlock.writable().readOnly).toEqual([]); // Landlock cannot keep .git read-only inside a writable root
  });

  test("the plan is made once: the policy's roots (the cwd, $TMPDIR from the shells' environment), .git read-only", () => {
    const { backend } = choice("auto", { ok: true, path: "/usr/bin/bwrap" });
    const c = call(backend, state(WW));
    expect(c.plan()).toBe(c.plan());
    expect(c.plan().writableRoots.map((w) => w.root)).toEqual([ws, join(root, "tmp")]);
    expect(c.plan().writableRoots[0]!.readOnlySubpaths).toContain(join(ws, ".git"));
  });

  test("a permission profile's plan takes $TMPDIR from the call's environment, not the server's (bwrap, Landlock, Seatbelt)", () => {
    // The shells' $TMPDIR (root/tmp) is not this process's: the plan must make the call's scratch folder writable.
    expect(process.env.TMPDIR).not.toBe(env.TMPDIR);
    const profile = parsePermissionProfile({
      type: "managed",
      network: "restricted",
      file_system: {
        type: "restricted",
        entries: [
          { path: { type: "special", value: { kind: "root" } }, access: "read" },
          { path: { type: "special", value: { kind: "project_roots" } }, access: "write" },
          { path: { type: "special", value: { kind: "tmpdir" } }, access: "write" },
        ],
      },
    });
    const chosen = [
      call(choice("auto", { ok: true, path: "/usr/bin/bwrap" }).backend, state(WW, { profile })),
      call(choice("landlock", { ok: false }).backend, state(WW, { profile })),
      call(choice("auto", { ok: true, path: "/usr/bin/bwrap" }).backend, state(WW, { profile }), { platform: "darwin" }),
    ];
    for (const c of chosen) expect(c.plan().writableRoots.map((w) => w.root)).toEqual([ws, join(root, "tmp")]);
  });
});

/**
 * The call's writable view against its own sandbox (issue 38): the call chosen by `BackendChoice.forCall`, started
 * with its own `launch()` argv (bubblewrap directly, our Landlock helper), probed from inside; each probe's outcome
 * must be what `canWrite` on `CallSandbox.writable()` says (test/security/differential/harness.ts, whose whole tier
 * is test/security/differential.test.ts and bench/differential.ts).
 */
describe.skipIf(skipWithout("CallSandbox against the kernel", toolMissing("python3", "bwrap")))("CallSandbox against the kernel", () => {
  const probes: Probe[] = [
    { op: "write", path: join(ws, "file.txt") },
    { op: "create", path: join(ws, "new.txt") },
    { op: "write", path: join(ws, ".git", "config") },
    { op: "create", path: join(ws, ".git", "hooks", "pre-commit") },
    { op: "create", path: join(ws, ".codex", "config.toml") },
    { op: "chmod", path: join(ws, ".git") },
    { op: "create", path: join(root, "tmp", "t.txt") },
    { op: "write", path: join(root, "outside.txt") },
    { op: "create", path: join(codexHome, "config.toml") },
  ];
  const site = { policy: WW, ws, workdir: ws, env, codexHome };
  const helperCtx = { helperExe: HELPER };

  test.each([
    ["bwrap" as const, { kind: "bwrap", via: "direct" } as Backend, [true, true, false, false, false, false, true, false, false]],
    ["landlock" as const, { kind: "landlock", abi: landlockAbi({}) } as Backend, [true, true, true, true, true, true, true, false, false]],
  ])("%s: the view says what the call's own sandbox enforces", async (kind, b, says) => {
    ensureBinary();
    writeFileSync(join(ws, "file.txt"), "x");
    writeFileSync(join(ws, ".git", "config"), "[core]\n");
    writeFileSync(join(root, "outside.txt"), "x");
    const { backend } = choice(kind, { ok: true, path: "/usr/bin/bwrap" });
    const c = call(backend, state(WW), helperCtx);
    const outcomes = await runCall(c, b, site, probes);
    expect(outcomes.map((o) => o.model)).toEqual(says);
    expect(outcomes.filter(isFailure).map((o) => describeOutcome(o, root))).toEqual([]);
  });
});
