/**
 * The sandbox is planned from the shell's environment, as the model is (issue 38, found by the differential tier):
 * `$TMPDIR` is a writable root of workspace-write, and `serve` starting bubblewrap directly used to plan it from its
 * own environment. With a `shell_environment_policy` that drops `TMPDIR`, the server's `$TMPDIR` stayed writable in
 * the sandbox while the escalation boundary's model (`CallSandbox.writable`, from the shell's environment) said it
 * was not. Judged on the host: a file the command writes in the server's `$TMPDIR`.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, rmSync } from "node:fs";
import { join } from "node:path";
import { closeAll, confDir, serveWithPid } from "../helpers/attack.ts";
import { skipWithout } from "../helpers/prereq.ts";
import { shellsMissing } from "../helpers/shells.ts";

afterAll(closeAll);

describe.skipIf(skipWithout("shell-environment roots", shellsMissing()))(
  "the sandbox's writable roots come from the shell's environment",
  () => {
    for (const backend of ["bwrap", "landlock"] as const) {
      test(`${backend}: the server's $TMPDIR, dropped from the shell's environment, is not writable`, async () => {
        const serverTmp = confDir("env-roots-tmp");
        const ws = confDir("env-roots-ws");
        const s = await serveWithPid({
          env: { TMPDIR: serverTmp },
          args: [
            "--sandbox",
            "workspace-write",
            "--sandbox-backend",
            backend,
            "--cd",
            ws,
            "-c",
            'shell_environment_policy.exclude=["TMPDIR"]',
          ],
        });
        try {
          const planted = join(serverTmp, "planted");
          const r = await s.shell({
            command: `echo in-ws > ok; echo x > ${planted}; echo "TMPDIR=\${TMPDIR:-unset}"`,
            workdir: ws,
            login: false,
          });
          expect(r.out.output).toContain("TMPDIR=unset");
          expect(existsSync(join(ws, "ok"))).toBe(true);
          expect(existsSync(planted)).toBe(false);
        } finally {
          await s.close();
          rmSync(serverTmp, { recursive: true, force: true });
          rmSync(ws, { recursive: true, force: true });
        }
      });
    }
  },
);
