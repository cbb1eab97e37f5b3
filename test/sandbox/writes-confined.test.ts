/**
 * A sandboxed command writes only inside its writable roots, whatever path it takes (split from extra.test.ts,
 * issue 42): through the compiled binary as `codex-linux-sandbox`, on both backends — a symlink or a hard link to an
 * outside file, `/proc/self/root`; under bubblewrap also a protected `.git` renamed, a missing `.codex` created, and a
 * project under `/tmp` or `$TMPDIR` whose `.git` a later writable bind must not uncover.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CONF_BASE } from "../helpers/cleanup.ts";
import { skipWithout } from "../helpers/prereq.ts";
import { box, bwrapMissing, run, WW } from "../helpers/sandbox-run.ts";

for (const backend of ["landlock", "bwrap"] as const) {
  describe.skipIf(process.platform !== "linux" || (backend === "bwrap" && skipWithout("bwrap backend tests", bwrapMissing)))(
    `writes stay inside (${backend})`,
    () => {
      test("a symlink inside the workspace pointing outside does not grant writes", () => {
        const b = box();
        writeFileSync(join(b.outside, "t.txt"), "secret");
        const r = run(backend, WW, b.cwd, ["bash", "-c", `ln -s ${b.outside}/t.txt lnk && echo pwned > lnk`]);
        expect(r.code).not.toBe(0);
        expect(readFileSync(join(b.outside, "t.txt"), "utf8")).toBe("secret");
      });

      test("a hard link to an outside file cannot be created (so not written through)", () => {
        const b = box();
        writeFileSync(join(b.outside, "t.txt"), "secret");
        const r = run(backend, WW, b.cwd, ["bash", "-c", `ln ${b.outside}/t.txt hl && echo pwned >> hl`]);
        expect(r.code).not.toBe(0);
        expect(existsSync(join(b.cwd, "hl"))).toBe(false);
        expect(readFileSync(join(b.outside, "t.txt"), "utf8")).toBe("secret");
      });

      test("/proc/self/root does not bypass the rules", () => {
        const b = box();
        const r = run(backend, WW, b.cwd, ["bash", "-c", `echo pwned > /proc/self/root${b.outside}/p.txt`]);
        expect(r.code).not.toBe(0);
        expect(existsSync(join(b.outside, "p.txt"))).toBe(false);
      });
    },
  );
}

describe.skipIf(process.platform !== "linux" || skipWithout("bwrap-only tests", bwrapMissing))("bwrap only", () => {
  test("renaming a protected .git is refused", () => {
    const b = box();
    Bun.spawnSync(["git", "init", "-q", "."], { cwd: b.cwd });
    const r = run("bwrap", WW, b.cwd, ["bash", "-c", "mv .git .git-moved"]);
    expect(r.code).not.toBe(0);
    expect(existsSync(join(b.cwd, ".git", "HEAD"))).toBe(true);
    expect(existsSync(join(b.cwd, ".git-moved"))).toBe(false);
  });

  test("a missing .codex is blocked inside the sandbox and leaves nothing behind", () => {
    const b = box();
    const r = run("bwrap", WW, b.cwd, ["bash", "-c", "mkdir -p .codex && echo x > .codex/config.toml"]);
    expect(r.code).not.toBe(0);
    expect(existsSync(join(b.cwd, ".codex"))).toBe(false);
  });
});

describe.skipIf(process.platform !== "linux" || skipWithout("bwrap mount-order tests", bwrapMissing))("bwrap mount order", () => {
  const cleanups: (() => void)[] = [];
  afterEach(() => {
    for (const c of cleanups.splice(0)) c();
  });
  // A read-only re-bind must come after every writable bind that covers it: before the fix, the /tmp bind
  // (added after the cwd's) covered the cwd's read-only .git and made it writable again.
  for (const where of ["/tmp", "TMPDIR"] as const) {
    test(`a project under ${where} keeps .git read-only`, () => {
      const tmpRoot = where === "/tmp" ? "/tmp" : mkdtempSync(join(CONF_BASE, "tmpdir-"));
      const proj = mkdtempSync(join(tmpRoot, "shellmcp-proj-"));
      cleanups.push(() => rmSync(proj, { recursive: true, force: true })); // /tmp itself: not under the run's folders
      expect(Bun.spawnSync(["git", "init", "-q", proj]).exitCode).toBe(0);
      const before = readFileSync(join(proj, ".git", "config"), "utf8");
      const env: Record<string, string> = where === "TMPDIR" ? { TMPDIR: tmpRoot } : {};
      const r = run(
        "bwrap",
        WW,
        proj,
        ["bash", "-c", "echo '[core]' >> .git/config; echo x > .git/hooks/pre-commit; touch inside && echo wrote-inside"],
        env,
      );
      expect(r.out).toContain("wrote-inside");
      expect(r.err).toContain("Read-only file system");
      expect(readFileSync(join(proj, ".git", "config"), "utf8")).toBe(before);
      expect(existsSync(join(proj, ".git", "hooks", "pre-commit"))).toBe(false);
    });
  }
});
