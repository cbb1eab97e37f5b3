/**
 * A sandboxed command cannot drive an exec-server of its user (from the issue 34/30 attack review, hole 4; it failed
 * on the build it was written against, 3c78816): the exec-server's token protects it against other users and against
 * the sandboxes of its own user alike, so a command with the network on cannot make it run a program outside every
 * sandbox. The attacker is test/security/exec-server-ws-client.py, run inside a `shell` call.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { closeAll, confDir, exists, requirePrograms, serveWithPid, token, waitFor } from "../helpers/attack.ts";
import { type Backend } from "../helpers/git-attack.ts";
import { skipWithout } from "../helpers/prereq.ts";
import { shellsMissing } from "../helpers/shells.ts";
import { assertOutside } from "../helpers/test-dirs.ts";

afterAll(closeAll);

describe.skipIf(skipWithout("exec-server from a sandbox", shellsMissing()))("an exec-server out of a sandbox's reach", () => {
  requirePrograms("python3", "bwrap");

  /*
   * HOLE 4 (the exec-server token protects against other users, not against the sandboxes it serves): the default
   * token file lies in a 0600 file under `$TMPDIR`, which every workspace-write sandbox of the same user reads (full
   * read) and even writes (a writable root). A sandboxed command with network access reads it and drives the
   * exec-server on 127.0.0.1, which runs anything unsandboxed: here it creates a marker outside every writable root.
   */
  for (const backend of ["bwrap", "landlock"] as Backend[])
    test(`${backend}, codex: a sandboxed command with the network on finds no token and runs nothing through the exec-server (review hole 4)`, async () => {
      const tmp = confDir("r34-es-tmp");
      const es = Bun.spawn([join(import.meta.dir, "..", "..", "dist", "shellmcp"), "exec-server"], {
        stdin: "ignore",
        stdout: "pipe",
        stderr: "pipe",
        env: { ...process.env, TMPDIR: tmp, CODEX_HOME: confDir("r34-es-codex-home") },
      });
      try {
        const reader = es.stdout.getReader();
        let url = "";
        while (!url.includes("\n")) url += new TextDecoder().decode((await reader.read()).value);
        const port = new URL(url.trim()).port;
        const codexHome = confDir("r34-home");
        const ws = confDir("r34-ws");
        const s = await serveWithPid({ codexHome, args: ["--sandbox-backend", backend], env: { TMPDIR: tmp } });
        expect(await s.sandboxState({ type: "workspace-write", network_access: true }, ws)).toEqual({});
        const outside = assertOutside(confDir("r34-outside"));
        const marker = join(outside, `exec-server-ran-${token()}`);
        const client = join(import.meta.dir, "exec-server-ws-client.py");
        const r = (
          await s.shell({
            command: `python3 ${client} '${tmp}/shellmcp-exec-server-*/token' 127.0.0.1:${port} ${marker}`,
            workdir: ws,
            login: false,
            timeout_ms: 20_000,
          })
        ).out;
        // The token is written to no file (docs/exec-server.md): the client finds none to present. Had it driven the
        // server ("sent"), the program would have run by the time its marker is waited for.
        expect(r.output).toContain("no token file");
        if (r.output.includes("sent")) await waitFor(() => exists(marker), 5000);
        expect({ ranOutsideTheSandbox: exists(marker) }).toEqual({ ranOutsideTheSandbox: false });
      } finally {
        es.kill("SIGTERM");
        await es.exited;
      }
    }, 90_000);
});
