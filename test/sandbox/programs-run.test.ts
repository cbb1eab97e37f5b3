/**
 * Ordinary programs still work inside the sandbox (split from extra.test.ts, issue 42): through the compiled binary
 * as `codex-linux-sandbox`, on both backends — git (status read-only; commit where `.git` is writable), Python's
 * multiprocessing, exit statuses passed through (a signal's 128+N, 127 for a missing command); and `shellmcp sandbox
 * linux` sets `CODEX_SANDBOX_NETWORK_DISABLED` only when the network is off, as Codex's programs expect.
 */
import { describe, expect, test } from "bun:test";
import { ensureBinary } from "../helpers/binary.ts";
import { skipWithout } from "../helpers/prereq.ts";
import { box, bwrapMissing, noGit, noPython, run, RO, WW } from "../helpers/sandbox-run.ts";

for (const backend of ["landlock", "bwrap"] as const) {
  describe.skipIf(process.platform !== "linux" || (backend === "bwrap" && skipWithout("bwrap backend tests", bwrapMissing)))(
    `programs run (${backend})`,
    () => {
      test.skipIf(noGit())("git: status works read-only, commit fails read-only", () => {
        const b = box();
        Bun.spawnSync(
          ["bash", "-c", "git init -q . && git -c user.email=a@b -c user.name=a commit -q --allow-empty -m init && echo x > a.txt"],
          { cwd: b.cwd },
        );
        const st = run(backend, RO, b.cwd, ["git", "status", "--short"]);
        expect(st.code).toBe(0);
        expect(st.out).toContain("a.txt");
        const c = run(backend, RO, b.cwd, ["bash", "-c", "git add a.txt && git -c user.email=a@b -c user.name=a commit -qm x"]);
        expect(c.code).not.toBe(0);
      });

      test.skipIf(noGit())(
        `git commit under workspace-write: ${backend === "bwrap" ? "refused (.git is read-only)" : "works (Landlock cannot protect .git)"}`,
        () => {
          const b = box();
          Bun.spawnSync(["bash", "-c", "git init -q . && echo x > a.txt"], { cwd: b.cwd });
          const c = run(backend, WW, b.cwd, ["bash", "-c", "git add a.txt && git -c user.email=a@b -c user.name=a commit -qm x"]);
          if (backend === "bwrap") {
            expect(c.code).not.toBe(0);
            expect(c.err).toMatch(/index.lock|Read-only file system/);
          } else expect(c.code).toBe(0);
        },
      );

      test.skipIf(noPython())("Python multiprocessing works", () => {
        const b = box();
        const r = run(backend, WW, b.cwd, [
          "python3",
          "-c",
          "import multiprocessing as m\nif __name__ == '__main__':\n  with m.Pool(2) as p: print(sum(p.map(abs, [-1, -2, 3])))\n",
        ]);
        expect(r.out).toBe("6\n");
        expect(r.code).toBe(0);
      });

      test("exit status passes through", () => {
        const b = box();
        expect(run(backend, RO, b.cwd, ["sh", "-c", "exit 7"]).code).toBe(7);
        expect(run(backend, RO, b.cwd, ["bash", "-c", "yes | head -1 >/dev/null; exit ${PIPESTATUS[0]}"]).code).toBe(141);
        const missing = run(backend, RO, b.cwd, ["no-such-command-shellmcp"]);
        expect(missing.code).toBe(127);
        expect(missing.err).toContain("command not found");
      });
    },
  );
}

describe.skipIf(process.platform !== "linux")("the sandbox CLI's environment", () => {
  test("the shellmcp sandbox linux CLI sets CODEX_SANDBOX_NETWORK_DISABLED only when the network is off", () => {
    const b = box();
    const off = Bun.spawnSync([ensureBinary(), "sandbox", "linux", "--", "sh", "-c", "echo ${CODEX_SANDBOX_NETWORK_DISABLED:-unset}"], {
      cwd: b.cwd,
    });
    expect(off.stdout.toString()).toBe("1\n");
    const on = Bun.spawnSync(
      [ensureBinary(), "sandbox", "linux", "--network", "--", "sh", "-c", "echo ${CODEX_SANDBOX_NETWORK_DISABLED:-unset}"],
      { cwd: b.cwd, env: { PATH: "/usr/bin:/bin" } },
    );
    expect(on.stdout.toString()).toBe("unset\n");
  });
});
