/**
 * The escalation boundary on real files: what an `Escalate` may run outside the sandbox (src/escalate/decision/boundary.ts)
 * and what a sandbox can write (src/sandbox/writable.ts).
 */
import { describe, expect, test } from "bun:test";
import { chmodSync, mkdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { checkEscalation, type EscalationBoundary } from "../../src/escalate/decision/boundary.ts";
import { escalatedEnv, safePath } from "../../src/escalate/decision/escalated-env.ts";
import { parseSandboxPolicy } from "../../src/sandbox/policy.ts";
import { canWrite, writableView } from "../../src/sandbox/writable.ts";
import { CONF_BASE } from "../helpers/cleanup.ts";
import { tempDir } from "../helpers/binary.ts";

const WW = parseSandboxPolicy({ type: "workspace-write", exclude_slash_tmp: true, exclude_tmpdir_env_var: true });

/** A project folder outside /tmp (so /tmp's writability does not blur the cases), with a git repo. */
function project(): string {
  const dir = join(CONF_BASE, `proj-${Math.random().toString(36).slice(2)}`);
  mkdirSync(dir, { recursive: true });
  expect(Bun.spawnSync(["git", "init", "-q", dir]).exitCode).toBe(0);
  return dir;
}

function boundary(
  proj: string,
  enforcement: "bwrap" | "landlock" | "none" = "bwrap",
  baseEnv: Record<string, string> = { PATH: "/usr/bin:/bin", HOME: "/nonexistent-home" },
): EscalationBoundary {
  return { baseEnv, writable: writableView(WW, proj, enforcement, {}) };
}

function script(path: string, text: string): string {
  writeFileSync(path, text);
  chmodSync(path, 0o755);
  return path;
}

describe("writable view", () => {
  test("bwrap: the project is writable, its .git is not; Landlock: both are; outside: neither", () => {
    const proj = project();
    const bw = writableView(WW, proj, "bwrap", {});
    const ll = writableView(WW, proj, "landlock", {});
    expect(canWrite(bw, join(proj, "a.txt"))).toBe(true);
    expect(canWrite(bw, join(proj, "new", "deep", "file"))).toBe(true);
    expect(canWrite(bw, join(proj, ".git", "config"))).toBe(false);
    expect(canWrite(bw, join(proj, ".git", "hooks", "pre-commit"))).toBe(false);
    expect(canWrite(ll, join(proj, ".git", "config"))).toBe(true);
    expect(canWrite(ll, "/dev/shm/x")).toBe(true);
    expect(canWrite(bw, "/dev/shm/x")).toBe(false);
    expect(canWrite(bw, "/usr/bin/id")).toBe(false);
    expect(canWrite(writableView(WW, proj, "none", {}), "/usr/bin/id")).toBe(true);
  });

  test("a symlink in the project pointing at a system file is judged by its target", () => {
    const proj = project();
    symlinkSync("/usr/bin/id", join(proj, "id-link"));
    const link = `/tmp/shellmcp-link-${process.pid}`; // directly under /tmp (a writable root), not under $TMPDIR
    symlinkSync(join(proj, "a.sh"), link);
    try {
      const bw = writableView(WW, proj, "bwrap", {});
      expect(canWrite(bw, join(proj, "id-link"))).toBe(false);
      expect(canWrite(bw, link)).toBe(true);
    } finally {
      rmSync(link, { force: true });
    }
  });
});

describe("escalated environment", () => {
  test("the shell's starting env plus allow-listed changes; loader, interpreter and git variables dropped", () => {
    const proj = project();
    const b = boundary(proj, "bwrap", { PATH: `${proj}/bin:/usr/bin:/bin:relative:`, HOME: "/root", SECRET_BASE: "kept" });
    const { env, dropped } = escalatedEnv(b, {
      PATH: "/evil:/usr/bin",
      HOME: "/evil",
      LD_PRELOAD: "/x.so",
      LD_LIBRARY_PATH: "/x",
      GIT_CONFIG_COUNT: "1",
      GIT_EXEC_PATH: "/x",
      BASH_ENV: "/x",
      PYTHONPATH: "/x",
      NODE_OPTIONS: "--require /x",
      GIT_AUTHOR_NAME: "Ann",
      LANG: "C.UTF-8",
      LC_ALL: "/evil/locale",
      TZ: "/evil/tz",
      PWD: proj,
      CODEX_ESCALATE_SOCKET: "3",
    });
    expect(env).toEqual({ PATH: "/usr/bin:/bin", HOME: "/root", SECRET_BASE: "kept", GIT_AUTHOR_NAME: "Ann", LANG: "C.UTF-8", PWD: proj });
    expect(dropped).toEqual([
      "BASH_ENV",
      "GIT_CONFIG_COUNT",
      "GIT_EXEC_PATH",
      "HOME",
      "LC_ALL",
      "LD_LIBRARY_PATH",
      "LD_PRELOAD",
      "NODE_OPTIONS",
      "PATH",
      "PYTHONPATH",
      "TZ",
    ]);
  });

  test("PATH keeps only absolute entries the sandbox cannot write", () => {
    const proj = project();
    const w = writableView(WW, proj, "bwrap", {});
    expect(safePath(w, `${proj}/node_modules/.bin::.:/usr/local/bin:/usr/bin`)).toBe("/usr/local/bin:/usr/bin");
  });
});

describe("checkEscalation", () => {
  test("a system program escalates by its canonical path; a link to it in the project does not (the link can be replaced)", () => {
    const proj = project();
    symlinkSync("/usr/bin/id", join(proj, "id"));
    const b = boundary(proj);
    expect(checkEscalation(b, { file: "/usr/bin/id", argv: ["id"], workdir: proj }, b.baseEnv)).toEqual({
      ok: true,
      path: "/usr/bin/id",
      cwd: proj,
    });
    const viaLink = checkEscalation(b, { file: join(proj, "id"), argv: ["id"], workdir: proj }, b.baseEnv);
    expect(viaLink.ok).toBe(false);
    expect(!viaLink.ok && viaLink.reason).toContain(`${join(proj, "id")}, on the program's path as the command named it, can be replaced`);
  });

  test("a program file the sandbox wrote is refused", () => {
    const proj = project();
    const evil = script(join(proj, "id"), "#!/bin/sh\necho pwned\n");
    const r = checkEscalation(boundary(proj), { file: evil, argv: ["id"], workdir: proj }, {});
    expect(r.ok).toBe(false);
    expect(!r.ok && r.reason).toContain("can be replaced by the sandboxed command");
  });

  describe("identity: the file and argv[0] are the program the rule names (issue 21, item 2)", () => {
    const grant = { program: "id" };
    test("the rule's id resolves through the trusted PATH; argv[0] may be the token, the path or its base name", () => {
      const proj = project();
      const b = boundary(proj);
      for (const argv0 of ["id", "/usr/bin/id"])
        expect(checkEscalation(b, { file: "/usr/bin/id", argv: [argv0, "-u"], workdir: proj }, b.baseEnv, grant).ok).toBe(true);
    });
    test("another argv[0] is refused: programs dispatch on it (exec -a git-archive git …)", () => {
      const proj = project();
      const b = boundary(proj);
      const r = checkEscalation(b, { file: "/usr/bin/git", argv: ["git-archive", "status"], workdir: proj }, b.baseEnv, { program: "git" });
      expect(r.ok).toBe(false);
      expect(!r.ok && r.reason).toContain('argv[0] "git-archive"');
    });
    test("a read-only program of the same name elsewhere is not the rule's program", () => {
      const proj = project();
      const b = boundary(proj);
      const r = checkEscalation(b, { file: "/usr/bin/whoami", argv: ["id"], workdir: proj }, b.baseEnv, grant);
      expect(r.ok).toBe(false);
      expect(!r.ok && r.reason).toContain("is not the program the rule names");
    });
    test("host_executable paths and path rules name the file exactly", () => {
      const proj = project();
      const b = boundary(proj);
      const he = { program: "id", hostExecutables: ["/usr/bin/id"] };
      expect(checkEscalation(b, { file: "/usr/bin/id", argv: ["id"], workdir: proj }, b.baseEnv, he).ok).toBe(true);
      expect(checkEscalation(b, { file: "/usr/bin/id", argv: ["id"], workdir: proj }, b.baseEnv, { program: "/usr/bin/id" }).ok).toBe(true);
      expect(
        checkEscalation(b, { file: "/usr/bin/whoami", argv: ["whoami"], workdir: proj }, b.baseEnv, { program: "/usr/bin/id" }).ok,
      ).toBe(false);
    });
  });

  test("a read-only script whose #! interpreter the sandbox wrote is refused; env NAME follows PATH", () => {
    const proj = project();
    const outside = tempDir("bnd-out-"); // /tmp is not writable in this view (exclude_slash_tmp)
    script(join(proj, "interp"), "#!/bin/sh\n");
    const viaInterp = script(join(outside, "tool"), `#!${proj}/interp -x\n`);
    const b = boundary(proj);
    const r1 = checkEscalation(b, { file: viaInterp, argv: ["tool"], workdir: proj }, b.baseEnv);
    expect(!r1.ok && r1.reason).toContain("#! interpreter");
    const relative = script(join(outside, "rel"), "#!interp\n");
    expect(checkEscalation(b, { file: relative, argv: ["rel"], workdir: proj }, b.baseEnv).ok).toBe(false);
    const viaEnv = script(join(outside, "py"), "#!/usr/bin/env sh\n");
    expect(checkEscalation(b, { file: viaEnv, argv: ["py"], workdir: proj }, { PATH: "/usr/bin:/bin" }).ok).toBe(true);
    mkdirSync(join(proj, "bin"));
    script(join(proj, "bin", "sh"), "#!/bin/sh\n");
    expect(checkEscalation(b, { file: viaEnv, argv: ["py"], workdir: proj }, { PATH: `${proj}/bin:/usr/bin` }).ok).toBe(false);
    const plain = script(join(outside, "ok"), "#!/bin/sh\necho ok\n");
    expect(checkEscalation(b, { file: plain, argv: ["ok"], workdir: proj }, b.baseEnv).ok).toBe(true);
  });

  test("/proc and /dev paths are never escalated (they name other things outside the sandbox)", () => {
    const proj = project();
    const b = boundary(proj);
    expect(checkEscalation(b, { file: "/proc/self/exe", argv: ["x"], workdir: proj }, {}).ok).toBe(false);
    expect(checkEscalation(b, { file: "/usr/bin/id", argv: ["id"], workdir: "/proc/self/cwd" }, {}).ok).toBe(false);
  });

  describe("git", () => {
    const git = "/usr/bin/git";
    test("a submodule (gitlink in the index) whose .git the sandbox can write: refused (issue 21, item 4)", () => {
      const proj = project();
      const sub = tempDir("bnd-sub-");
      const g = (cwd: string, ...a: string[]) =>
        expect(
          Bun.spawnSync(["git", "-c", "protocol.file.allow=always", "-c", "user.name=t", "-c", "user.email=t@t", ...a], { cwd }).exitCode,
        ).toBe(0);
      g(sub, "init", "-q");
      g(sub, "commit", "-q", "--allow-empty", "-m", "s");
      // Deeper than the search for nested repositories (policy.ts NESTED_GIT_MAX_DEPTH): under bubblewrap a
      // shallower submodule's .git is read-only (issue 34, item 5), so the sandbox could not write it.
      g(proj, "submodule", "add", "-q", sub, "mods/a/b/sub");
      const b = boundary(proj);
      const r = checkEscalation(b, { file: git, argv: ["git", "status"], workdir: proj }, b.baseEnv);
      expect(r.ok).toBe(false);
      expect(!r.ok && r.reason).toContain(`submodule repository ${join(proj, "mods", "a", "b", "sub", ".git")}`);
      // Without .gitmodules the gitlink in the index still counts.
      rmSync(join(proj, ".gitmodules"));
      expect(checkEscalation(b, { file: git, argv: ["git", "status"], workdir: proj }, b.baseEnv).ok).toBe(false);
    });
    test("bwrap, project root with a read-only .git: escalates", () => {
      const proj = project();
      const b = boundary(proj);
      expect(checkEscalation(b, { file: git, argv: ["git", "status"], workdir: proj }, b.baseEnv).ok).toBe(true);
    });
    test("Landlock (.git writable): refused", () => {
      const proj = project();
      const b = boundary(proj, "landlock");
      const r = checkEscalation(b, { file: git, argv: ["git", "status"], workdir: proj }, b.baseEnv);
      expect(!r.ok && r.reason).toContain(".git");
    });
    test("a repository the sandbox created (nested) or could create (subfolder): refused", () => {
      const proj = project();
      mkdirSync(join(proj, "sub", "r"), { recursive: true });
      const b = boundary(proj);
      expect(checkEscalation(b, { file: git, argv: ["git", "status"], workdir: join(proj, "sub") }, b.baseEnv).ok).toBe(false);
      Bun.spawnSync(["git", "init", "-q", join(proj, "sub", "r")]);
      expect(checkEscalation(b, { file: git, argv: ["git", "status"], workdir: join(proj, "sub", "r") }, b.baseEnv).ok).toBe(false);
      expect(checkEscalation(b, { file: git, argv: ["git", "-C", "sub/r", "status"], workdir: proj }, b.baseEnv).ok).toBe(false);
      expect(checkEscalation(b, { file: git, argv: ["git", `--git-dir=${proj}/sub/r/.git`, "status"], workdir: proj }, b.baseEnv).ok).toBe(
        false,
      );
    });
    test("a writable global config, include or core.hooksPath: refused", () => {
      const proj = project();
      const b = boundary(proj, "bwrap", { PATH: "/usr/bin:/bin", HOME: proj });
      expect(checkEscalation(b, { file: git, argv: ["git", "status"], workdir: proj }, b.baseEnv).ok).toBe(false);
      const home = tempDir("bnd-home-");
      const b2 = boundary(proj, "bwrap", { PATH: "/usr/bin:/bin", HOME: home });
      expect(checkEscalation(b2, { file: git, argv: ["git", "status"], workdir: proj }, b2.baseEnv).ok).toBe(true);
      writeFileSync(join(home, ".gitconfig"), `[core]\n\thooksPath = ${proj}/hooks\n`);
      expect(checkEscalation(b2, { file: git, argv: ["git", "status"], workdir: proj }, b2.baseEnv).ok).toBe(false);
      writeFileSync(join(home, ".gitconfig"), `[include]\n\tpath = ${proj}/extra.gitconfig\n`);
      expect(checkEscalation(b2, { file: git, argv: ["git", "status"], workdir: proj }, b2.baseEnv).ok).toBe(false);
    });
  });
});
