/**
 * One file to run (issue 25): the compiled executable, copied alone into a folder (no `shells/` beside it, no role
 * links), serves with the portable patched shells it carries. It copies the shell to a checked folder outside
 * every writable root (src/carried/portable-shells.ts), runs calls under the real sandbox with rules applied, and
 * replaces a copy that was changed before the next start.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { portableShellBases } from "../../src/carried/portable-shells.ts";
import { ensureBinary, ROOT } from "../helpers/binary.ts";
import { startServe, type Session } from "../helpers/mcp.ts";
import { skipWithout } from "../helpers/prereq.ts";
import { CONF_BASE } from "../helpers/test-dirs.ts";

const STATIC = join(ROOT, "dist", "shells-static", `${process.platform}-${process.arch}`);

/** Why this suite cannot run: no portable shells built, or an executable built before them (carries none). */
function portableMissing(): string | undefined {
  if (process.platform !== "linux") return "portable shells are Linux-only";
  for (const k of ["bash", "zsh"]) if (!existsSync(join(STATIC, k))) return `no ${STATIC}/${k} (bash scripts/build-shells-static.sh)`;
  const exe = readFileSync(ensureBinary());
  const bash = readFileSync(join(STATIC, "bash"));
  if (exe.indexOf(bash.subarray(bash.length >> 1, (bash.length >> 1) + 256)) < 0)
    return "dist/shellmcp carries no portable shells: it was built before them (run bun build.ts again)";
  return undefined;
}

const RULES = 'prefix_rule(pattern=["rm"], decision="forbidden")\n';
const sessions: Session[] = [];
/** Executable copies made here: each gets role links in a `roles-<hash of its path>` folder, removed at the end. */
const copies: string[] = [];
afterAll(async () => {
  for (const s of sessions) await s.close();
  for (const exe of copies) {
    const sub = `roles-${new Bun.CryptoHasher("sha256").update(exe).digest("hex").slice(0, 16)}`;
    for (const base of portableShellBases()) rmSync(join(base, sub), { recursive: true, force: true });
  }
});

describe.skipIf(skipWithout("portable shells (one file to run)", portableMissing()))("the executable alone", () => {
  /** The executable copied alone into a new folder outside every writable root. */
  function alone(): string {
    const dir = mkdtempSync(join(CONF_BASE, "alone-"));
    const exe = join(dir, "shellmcp");
    copyFileSync(ensureBinary(), exe);
    chmodSync(exe, 0o755);
    copies.push(exe);
    return exe;
  }

  /**
   * One `shell` call of a new `serve` of `exe`, whose HOME and CODEX_HOME is `home` (default: a new folder), with
   * `extra` arguments.
   */
  async function call(exe: string, shell: "bash" | "zsh", command: string, home?: string, extra: string[] = []) {
    const work = mkdtempSync(join(CONF_BASE, "work-"));
    mkdirSync(join(work, "sub"));
    const s = await startServe({
      command: [exe],
      args: ["--sandbox", "workspace-write", "--shell", shell, ...extra],
      rules: RULES,
      cwd: work,
      codexHome: home,
    });
    sessions.push(s);
    const r = await s.shell({ command, workdir: work, login: false });
    await s.close();
    sessions.pop();
    return r.out;
  }

  for (const shell of ["bash", "zsh"] as const) {
    test(`serve runs the carried ${shell}: a checked copy, sandboxed, rules applied`, async () => {
      const exe = alone();
      const out = await call(
        exe,
        shell,
        `echo "exe=$(readlink /proc/$$/exe)"; rm -f sub/x; echo "rm exit $?"; echo x > ${CONF_BASE}/outside`,
      );
      const path = /exe=(\S+)/.exec(out.output)?.[1];
      expect(path, out.output).toMatch(new RegExp(`/shells-[0-9a-f]{16}/${shell}$`));
      expect(path!.startsWith(join(exe, ".."))).toBe(false);
      expect(readFileSync(path!).equals(readFileSync(join(STATIC, shell)))).toBe(true);
      expect(out.output).toContain("Execution denied: Execution forbidden by policy");
      expect(out.output).toContain("rm exit 1");
      expect(out.output).toMatch(/read-only file system|permission denied/i);
      expect(existsSync(join(CONF_BASE, "outside"))).toBe(false);
    });
  }

  test("--intercept-all: a script without #! run as the last command goes to the carried bash: its own commands meet the rules", async () => {
    // With --intercept-all every exec goes through the exec wrapper (codex-execve-wrapper), as with Codex's own
    // patched bash. `./script` is the last command of -c, so bash execs the wrapper in place: its parent is then not
    // a shell. The wrapper runs the script in the sandbox (Run); execve fails with ENOEXEC and the wrapper picks the
    // interpreter. /bin/sh (what it picked when no shells/ lay beside the executable) ran the script's rm unasked.
    const out = await call(
      alone(),
      "bash",
      `touch sub/y && printf 'rm sub/y; echo "inner rm $?"\\n' > script && chmod +x script && ./script`,
      undefined,
      ["--intercept-all"],
    );
    expect(out.output).toContain("Execution denied: Execution forbidden by policy");
    expect(out.output).toContain("inner rm 1");
    expect(out.exit_code).toBe(0);
  });

  test("a changed copy is replaced before the next start uses it", async () => {
    const exe = alone();
    // Both starts share HOME: a user other than root without /run/user/<uid> keeps the copies in ~/.cache/shellmcp.
    const home = mkdtempSync(join(CONF_BASE, "home-"));
    const first = /exe=(\S+)/.exec((await call(exe, "bash", 'echo "exe=$(readlink /proc/$$/exe)"', home)).output)![1]!;
    writeFileSync(first, "#!/bin/sh\necho tampered\n");
    const out = await call(exe, "bash", 'echo "exe=$(readlink /proc/$$/exe) $BASH_VERSION"', home);
    expect(out.output).not.toContain("tampered");
    expect(out.output).toContain("5.2.15");
    expect(readFileSync(first).equals(readFileSync(join(STATIC, "bash")))).toBe(true);
  });
});
