/**
 * Seatbelt unit tests with the platform injected (the macOS-only paths run here on Linux): path canonicalisation
 * as macOS sees it, the CLI on darwin (the sandbox-exec argv and environment it runs) and elsewhere, the launcher
 * `serve` uses for shells, and the compiled binary's `sandbox macos` / `debug seatbelt` commands.
 */
import { afterAll, describe, expect, test } from "bun:test";
import {
  appendFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { hostGit } from "../../helpers/attack.ts";
import { join } from "node:path";
import { sandboxMacosCli, type MacosCliHost } from "../../../src/sandbox-cli/macos.ts";
import {
  darwinPath,
  SANDBOX_EXEC_PATH,
  seatbeltLaunch,
  seatbeltPolicy,
  seatbeltShellLaunch,
  seatbeltWritableView,
} from "../../../src/sandbox/macos/seatbelt.ts";
import { planSandboxPolicy, type FilesystemPlan } from "../../../src/sandbox/filesystem-plan.ts";
import { ensureBinary, ROOT } from "../../helpers/binary.ts";

const WS = mkdtempSync("/tmp/sbunit-");
const proj = join(WS, "proj");
mkdirSync(join(proj, ".git"), { recursive: true });
afterAll(() => rmSync(WS, { recursive: true, force: true }));

describe("darwinPath", () => {
  const fakeReal = (existing: Record<string, string>) => (p: string) => {
    const r = existing[p];
    if (r === undefined) throw new Error("ENOENT");
    return r;
  };

  test("/tmp, /var and /etc move under /private; look-alike prefixes do not", () => {
    const id = (p: string) => p;
    expect(darwinPath("/tmp/a b", id)).toBe("/private/tmp/a b");
    expect(darwinPath("/tmp", id)).toBe("/private/tmp");
    expect(darwinPath("/var/folders/x/T", id)).toBe("/private/var/folders/x/T");
    expect(darwinPath("/etc/hosts", id)).toBe("/private/etc/hosts");
    expect(darwinPath("/private/tmp/x", id)).toBe("/private/tmp/x");
    expect(darwinPath("/tmpfoo/x", id)).toBe("/tmpfoo/x");
    expect(darwinPath("/Users/me/../me/proj/", id)).toBe("/Users/me/proj");
  });

  test("a missing path keeps its missing components under its nearest existing ancestor's real path", () => {
    const real = fakeReal({ "/Users/me/link": "/Volumes/Work/proj", "/Users/me": "/Users/me", "/": "/" });
    expect(darwinPath("/Users/me/link/.codex/config.toml", real)).toBe("/Volumes/Work/proj/.codex/config.toml");
    expect(darwinPath("/nowhere/at/all", real)).toBe("/nowhere/at/all");
  });
});

function host(platform: NodeJS.Platform, over: Partial<MacosCliHost> = {}) {
  const calls: Array<{ argv: string[]; env: Record<string, string | undefined> }> = [];
  let out = "";
  let err = "";
  const h: MacosCliHost = {
    platform,
    cwd: proj,
    env: { PATH: "/usr/bin:/bin", HOME: "/Users/me" },
    out: (t) => (out += t),
    err: (t) => (err += t),
    run: async (argv, env) => {
      calls.push({ argv, env });
      return 7;
    },
    ...over,
  };
  return { h, calls, out: () => out, err: () => err };
}

describe("sandbox macos CLI (platform injected)", () => {
  test("on darwin it runs /usr/bin/sandbox-exec with the policy, the parameters and Codex's markers, and returns the status", async () => {
    const t = host("darwin");
    const code = await sandboxMacosCli(["touch", "x"], { addDir: [], fullAuto: true }, t.h);
    expect(code).toBe(7);
    expect(t.calls.length).toBe(1);
    const { argv, env } = t.calls[0]!;
    expect(argv[0]).toBe(SANDBOX_EXEC_PATH);
    expect(argv[1]).toBe("-p");
    expect(argv[2]).toStartWith("(version 1)\n");
    expect(argv.slice(-3)).toEqual(["--", "touch", "x"]);
    expect(argv).toContain(`-DWRITABLE_ROOT_0=/private${proj}`);
    expect(argv).toContain(`-DWRITABLE_ROOT_0_EXCLUDED_0=/private${proj}/.git`);
    expect(env.CODEX_SANDBOX).toBe("seatbelt");
    expect(env.CODEX_SANDBOX_NETWORK_DISABLED).toBe("1");
    expect(env.PATH).toBe("/usr/bin:/bin");
  });

  test("network on: no CODEX_SANDBOX_NETWORK_DISABLED, the network rules are in the policy", async () => {
    const t = host("darwin");
    await sandboxMacosCli(["true"], { addDir: [], network: true }, t.h);
    const { argv, env } = t.calls[0]!;
    expect(env.CODEX_SANDBOX_NETWORK_DISABLED).toBeUndefined();
    expect(argv[2]).toContain("(allow network-outbound)");
  });

  test("danger-full-access runs the command itself, without markers", async () => {
    const t = host("darwin");
    await sandboxMacosCli(["true"], { addDir: [], sandbox: "danger-full-access" }, t.h);
    expect(t.calls[0]!.argv).toEqual(["true"]);
    expect(t.calls[0]!.env.CODEX_SANDBOX).toBeUndefined();
  });

  test("elsewhere it refuses to run (exit 2) but --print-policy works", async () => {
    const t = host("linux");
    expect(await sandboxMacosCli(["true"], { addDir: [] }, t.h)).toBe(2);
    expect(t.err()).toContain("only on macOS");
    expect(t.calls.length).toBe(0);
    const p = host("linux");
    expect(await sandboxMacosCli(["true"], { addDir: [], printPolicy: true }, p.h)).toBe(0);
    expect(p.out()).toContain("(deny default)");
    expect(p.calls.length).toBe(0);
  });

  // The writable view is in macOS's paths (/var → /private/var, …): on Linux the workspace must lie where those are
  // the same, i.e. outside /tmp, /var and /etc (the checkout's .cache when the checkout does).
  const macSame = /^\/(tmp|var|etc)(\/|$)/.test(realpathSync(ROOT)) ? undefined : join(realpathSync(ROOT), ".cache");
  test.skipIf(macSame === undefined)(
    "the one launch path (issue 39): a hook and a config planted in a nested repository (Seatbelt keeps only the roots' own .git) are undone and reported",
    async () => {
      mkdirSync(macSame!, { recursive: true });
      const base = mkdtempSync(join(macSame!, "sb-macos-"));
      try {
        const ws = join(base, "ws");
        const codexHome = join(base, "codex-home");
        mkdirSync(codexHome, { recursive: true });
        const sub = join(ws, "vendor", "lib");
        mkdirSync(sub, { recursive: true });
        hostGit(sub, "init", "-q", "-b", "main");
        const config = readFileSync(join(sub, ".git", "config"), "utf8");
        const policy = JSON.stringify({ type: "workspace-write", exclude_slash_tmp: true, exclude_tmpdir_env_var: true });
        const plant = async () => {
          writeFileSync(join(sub, ".git", "hooks", "pre-commit"), "#!/bin/sh\ntouch /tmp/pwned\n", { mode: 0o755 });
          appendFileSync(join(sub, ".git", "config"), "[core]\n\tfsmonitor = touch /tmp/pwned\n");
          return 0;
        };
        // What Seatbelt lets the command write (the policy text): the nested repository's .git is not excluded.
        const t0 = host("darwin", { cwd: ws, codexHome });
        await sandboxMacosCli(["true"], { addDir: [], policy }, t0.h);
        expect(t0.calls[0]!.argv.join(" ")).not.toContain("vendor/lib/.git");
        // Stands in for a command under Seatbelt writing what the policy lets it.
        const t = host("darwin", { cwd: ws, codexHome, run: plant });
        expect(await sandboxMacosCli(["true"], { addDir: [], policy }, t.h)).toBe(0);
        expect(existsSync(join(sub, ".git", "hooks", "pre-commit"))).toBe(false);
        expect(readFileSync(join(sub, ".git", "config"), "utf8")).toBe(config);
        expect(t.err()).toContain("pre-commit");
        expect(t.err()).toContain(".git/config");
      } finally {
        rmSync(base, { recursive: true, force: true });
      }
    },
  );

  test("bad input is a usage error, nothing runs", async () => {
    for (const [cmd, o] of [
      [[], {}],
      [["true"], { permissionProfile: '{"type":"disabled"}', network: true }],
      [["true"], { permissionProfile: "{" }],
      [["true"], { policy: '{"type":"workspace-write","netwrk_access":true}' }],
      [["true"], { sandbox: "yolo" }],
      [
        ["true"],
        {
          permissionProfile: JSON.stringify({
            type: "managed",
            file_system: { type: "restricted", entries: [{ path: { type: "glob_pattern", pattern: "**/*.env" }, access: "none" }] },
            network: "restricted",
          }),
        },
      ],
    ] as const) {
      const t = host("darwin");
      expect(await sandboxMacosCli([...cmd], { addDir: [], ...o }, t.h)).toBe(2);
      expect(t.err()).toStartWith("shellmcp: ");
      expect(t.calls.length).toBe(0);
    }
  });
});

describe("launcher for serve", () => {
  test("the patched shell under Seatbelt: sandbox-exec … -- shell -lc command", () => {
    const plan = planSandboxPolicy(
      {
        type: "workspace-write",
        writable_roots: [],
        read_only_access: { type: "full-access" },
        network_access: false,
        exclude_slash_tmp: true,
        exclude_tmpdir_env_var: true,
      },
      proj,
      {},
    );
    const l = seatbeltShellLaunch(plan, {
      shellPath: "/opt/shellmcp/shells/bash",
      login: true,
      command: "git status",
      exePath: "/opt/shellmcp/bin/shellmcp",
    });
    expect(l.sandboxed).toBe(true);
    expect(l.argv.slice(0, 2)).toEqual([SANDBOX_EXEC_PATH, "-p"]);
    expect(l.argv.slice(-4)).toEqual(["--", "/opt/shellmcp/shells/bash", "-lc", "git status"]);
    expect(l.env).toEqual({ CODEX_SANDBOX: "seatbelt", CODEX_SANDBOX_NETWORK_DISABLED: "1" });
  });

  test("restricted reads: the shell's and this binary's folders become readable roots", () => {
    const plan: FilesystemPlan = {
      sandboxed: true,
      fullRead: false,
      fullWrite: false,
      readableRoots: [proj],
      includePlatformDefaults: true,
      writableRoots: [],
      deniedPaths: [],
      network: "restricted",
      strict: true,
    };
    const l = seatbeltShellLaunch(
      plan,
      { shellPath: "/opt/shellmcp/shells/bash", login: false, command: "ls", exePath: "/opt/shellmcp/bin/shellmcp" },
      { canonicalize: (p) => p },
    );
    expect(l.policy!.params).toEqual([
      ["READABLE_ROOT_0", proj],
      ["READABLE_ROOT_1", "/opt/shellmcp/shells"],
      ["READABLE_ROOT_2", "/opt/shellmcp/bin"],
    ]);
    expect(l.policy!.text).toContain("; [P01]");
  });

  test("unsandboxed plans run the shell directly", () => {
    const plan = planSandboxPolicy({ type: "danger-full-access" }, proj, {});
    expect(seatbeltLaunch(plan, ["/bin/sh", "-c", "x"])).toEqual({ argv: ["/bin/sh", "-c", "x"], env: {}, sandboxed: false });
  });

  test("external-sandbox with the network off is still wrapped (the network must stay off)", () => {
    const plan = planSandboxPolicy({ type: "external-sandbox", network_access: "restricted" }, proj, {});
    const l = seatbeltLaunch(plan, ["true"]);
    expect(l.sandboxed).toBe(true);
    expect(l.policy!.text).toContain('(allow file-write* (regex #"^/"))');
    expect(l.policy!.text).not.toContain("network-outbound");
  });

  test("a denied path under full read and full write becomes an exclusion of `/` in both sections", () => {
    const plan: FilesystemPlan = {
      sandboxed: true,
      fullRead: true,
      fullWrite: true,
      readableRoots: [],
      includePlatformDefaults: false,
      writableRoots: [],
      deniedPaths: ["/Users/me/.ssh"],
      network: "enabled",
      strict: true,
    };
    const p = seatbeltPolicy(plan, { host: { canonicalize: (x) => x } });
    expect(p.params).toEqual([
      ["READABLE_ROOT_0", "/"],
      ["READABLE_ROOT_0_EXCLUDED_0", "/Users/me/.ssh"],
      ["WRITABLE_ROOT_0", "/"],
      ["WRITABLE_ROOT_0_EXCLUDED_0", "/Users/me/.ssh"],
    ]);
    expect(p.text).not.toContain("(allow file-read*)\n");
  });
});

describe("writable view for the escalation boundary", () => {
  const id = { canonicalize: (p: string) => p };
  test("roots and every excluded path, including an inner root's carve-outs under an outer root", () => {
    const plan: FilesystemPlan = {
      sandboxed: true,
      fullRead: true,
      fullWrite: false,
      readableRoots: [],
      includePlatformDefaults: false,
      writableRoots: [
        { root: "/w/proj", readOnlySubpaths: ["/w/proj/.git"] },
        { root: "/w", readOnlySubpaths: [] },
      ],
      deniedPaths: [],
      network: "restricted",
      strict: true,
    };
    expect(seatbeltWritableView(plan, id)).toEqual({ full: false, roots: ["/w/proj", "/w"], readOnly: ["/w/proj/.git"] });
    const p = seatbeltPolicy(plan, { host: id });
    expect(p.params).toContainEqual(["WRITABLE_ROOT_1_EXCLUDED_0", "/w/proj/.git"]);
  });

  test("restricted reads with platform defaults: the scratch folders are writable too", () => {
    const plan: FilesystemPlan = {
      sandboxed: true,
      fullRead: false,
      fullWrite: false,
      readableRoots: [],
      includePlatformDefaults: true,
      writableRoots: [],
      deniedPaths: [],
      network: "restricted",
      strict: true,
    };
    expect(seatbeltWritableView(plan, id)).toEqual({ full: false, roots: ["/private/tmp", "/private/var/tmp"], readOnly: [] });
  });

  test("legacy plans: the protected names under every root are read-only", () => {
    const plan = planSandboxPolicy(
      {
        type: "workspace-write",
        writable_roots: [],
        read_only_access: { type: "full-access" },
        network_access: false,
        exclude_slash_tmp: true,
        exclude_tmpdir_env_var: true,
      },
      proj,
      {},
    );
    const v = seatbeltWritableView(plan);
    expect(v.roots).toEqual([`/private${proj}`]);
    expect(v.readOnly.sort()).toEqual([".agents", ".codex", ".git"].map((n) => `/private${proj}/${n}`));
  });
});

describe("the compiled binary", () => {
  const bin = ensureBinary();
  const run = (args: string[]) => {
    const r = Bun.spawnSync([bin, ...args], { cwd: proj, env: { PATH: "/usr/bin:/bin", HOME: WS }, stdout: "pipe", stderr: "pipe" });
    return { code: r.exitCode, out: r.stdout.toString(), err: r.stderr.toString() };
  };

  test("debug seatbelt --print-policy prints the policy and argv (any OS)", () => {
    const r = run(["debug", "seatbelt", "--full-auto", "--print-policy", "--", "echo", "hi"]);
    expect(r.err).toBe("");
    expect(r.code).toBe(0);
    expect(r.out).toStartWith("(version 1)\n");
    expect(r.out).toContain(`;; "-DWRITABLE_ROOT_0=/private${proj}"`);
    expect(r.out).toContain(';; "/usr/bin/sandbox-exec"');
    expect(r.out).toContain(";; CODEX_SANDBOX=seatbelt");
  });

  test("credential stores (a symlinked one at its target) and CODEX_HOME's secrets are excluded from the read roots; the rest of HOME is not (issue 39)", () => {
    const home = join(WS, "user-home");
    const elsewhere = join(WS, "elsewhere");
    mkdirSync(join(home, ".ssh"), { recursive: true });
    mkdirSync(join(home, ".codex"), { recursive: true });
    mkdirSync(elsewhere, { recursive: true });
    writeFileSync(join(home, ".npmrc"), "//registry/:_authToken=x\n");
    writeFileSync(join(home, ".codex", "auth.json"), "{}\n");
    writeFileSync(join(home, ".codex", "config.toml"), "\n");
    writeFileSync(join(home, "notes.txt"), "plain\n");
    writeFileSync(join(elsewhere, "pypirc"), "[pypi]\n");
    symlinkSync(join(elsewhere, "pypirc"), join(home, ".pypirc"));
    const r = Bun.spawnSync([bin, "debug", "seatbelt", "--full-auto", "--print-policy", "--", "echo", "hi"], {
      cwd: proj,
      env: { PATH: "/usr/bin:/bin", HOME: home },
      stdout: "pipe",
      stderr: "pipe",
    });
    expect(r.stderr.toString()).toBe("");
    const excluded = [...r.stdout.toString().matchAll(/"-DREADABLE_ROOT_0_EXCLUDED_\d+=([^"]+)"/g)].map((m) => m[1]!);
    for (const hidden of [join(home, ".ssh"), join(home, ".npmrc"), join(home, ".codex", "auth.json"), join(elsewhere, "pypirc")])
      expect(excluded).toContain(`/private${hidden}`);
    for (const plain of ["notes.txt", ".codex/config.toml", ".pypirc"]) expect(excluded).not.toContain(`/private${join(home, plain)}`);
    expect(r.stdout.toString()).not.toContain("(allow file-read*)\n");
  });

  test.skipIf(process.platform === "darwin")("sandbox macos without --print-policy refuses off macOS", () => {
    const r = run(["sandbox", "macos", "--", "echo", "hi"]);
    expect(r.code).toBe(2);
    expect(r.out).toBe("");
    expect(r.err).toContain("only on macOS");
  });
});
