/**
 * Only stdio, fd 3 and the escalation socket reach a sandboxed command (split from extra.test.ts, issue 42): through
 * the compiled binary as `codex-linux-sandbox`, on both backends.
 */
import { describe, expect, test } from "bun:test";
import { binaryAs } from "../helpers/binary.ts";
import { skipWithout } from "../helpers/prereq.ts";
import { box, bwrapMissing, run, RO } from "../helpers/sandbox-run.ts";

for (const backend of ["landlock", "bwrap"] as const) {
  describe.skipIf(process.platform !== "linux" || (backend === "bwrap" && skipWithout("bwrap backend tests", bwrapMissing)))(
    `fds (${backend})`,
    () => {
      test("only stdio and inherited fds reach the command", () => {
        const b = box();
        // The command lists its own fds with no pipeline (a shell holding a pipeline's pipes while `ls` reads its fd
        // table made this flaky); `ls` itself holds its directory at the lowest free fd, 3.
        const r = run(backend, RO, b.cwd, ["bash", "-c", "exec ls /proc/self/fd"]);
        expect(r.out.split("\n").filter(Boolean).join(" ")).toBe("0 1 2 3");
      });

      test("fd 3 and the escalation socket (at any number) are passed through; other fds are not", () => {
        const b = box();
        const argv = [
          binaryAs("codex-linux-sandbox"),
          "--backend",
          backend,
          "--sandbox-policy-cwd",
          b.cwd,
          "--sandbox-policy",
          JSON.stringify(RO),
          "--",
          "bash",
          "-c",
          "echo via-3 >&3; echo via-socket >&9; echo via-5 >&5 2>/dev/null || echo no-5",
        ];
        const r = Bun.spawnSync(["bash", "-c", `"$@" 3>&1 9>&1 5>&1`, "x", ...argv], {
          cwd: b.cwd,
          env: { PATH: "/usr/bin:/bin", CODEX_ESCALATE_SOCKET: "9" },
          stdout: "pipe",
          stderr: "pipe",
        });
        expect(r.stdout.toString()).toBe("via-3\nvia-socket\nno-5\n");
      });
    },
  );
}
