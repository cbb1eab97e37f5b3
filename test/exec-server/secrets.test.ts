/**
 * Issue 39 for the exec-server's own sandboxes: a `process/start` with a sandbox (Codex 0.169's workspace-write
 * profile, and the older `sandboxPolicy` shape) reads neither the exec-server's own credential files — a
 * `--ws-token-file` outside CODEX_HOME, as the docs advised before (`~/.exec-token`) — nor the user's credential
 * stores or CODEX_HOME's `auth.json`, while it still reads the rest of HOME. Judged by what the process prints.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CONF_BASE } from "../helpers/cleanup.ts";
import { ensureBinary } from "../helpers/binary.ts";
import { ExecClient, registerToken, workspaceWrite } from "./client.ts";
import { startServer, type StartedServer } from "./codex-harness.ts";

const base = join(CONF_BASE, `exec-secrets-${Math.random().toString(36).slice(2)}`);
const home = join(base, "home");
const codexHome = join(home, ".codex");
const proj = join(base, "proj");
const tokenFile = join(home, ".exec-token");
const TOKEN = `tok-${Math.random().toString(36).slice(2)}-${Math.random().toString(36).slice(2)}`;
const SECRET = `SECRET-${Math.random().toString(36).slice(2)}`;
let server: StartedServer;

beforeAll(async () => {
  for (const d of [join(home, ".ssh"), codexHome, proj]) mkdirSync(d, { recursive: true });
  writeFileSync(tokenFile, `${TOKEN}\n`, { mode: 0o600 });
  writeFileSync(join(home, ".npmrc"), `${SECRET} npmrc\n`);
  writeFileSync(join(home, ".ssh", "id_ed25519"), `${SECRET} ssh\n`);
  writeFileSync(join(codexHome, "auth.json"), `${SECRET} auth\n`);
  writeFileSync(join(home, "notes.txt"), "PLAIN notes\n");
  server = await startServer([ensureBinary(), "exec-server", "--ws-auth", "capability-token", "--ws-token-file", tokenFile], {
    PATH: "/usr/bin:/bin",
    HOME: home,
    CODEX_HOME: codexHome,
  });
  registerToken(server.url, TOKEN);
});

afterAll(async () => {
  await server?.stop();
});

const READ = [tokenFile, join(home, ".npmrc"), join(home, ".ssh", "id_ed25519"), join(codexHome, "auth.json"), join(home, "notes.txt")]
  .map((p) => `c=$(cat '${p}' 2>/dev/null); if [ -n "$c" ]; then echo "${p} $c"; else echo "${p} unreadable"; fi`)
  .join("; ");

describe("issue 39: the exec-server's sandboxed processes read no secret", () => {
  test("a credential file outside CODEX_HOME gets a warning at start; one in CODEX_HOME none", async () => {
    const inside = join(codexHome, "exec-server.token");
    writeFileSync(inside, `${TOKEN}\n`, { mode: 0o600 });
    const said: string[] = [];
    for (const file of [tokenFile, inside]) {
      const es = Bun.spawn([ensureBinary(), "exec-server", "--ws-auth", "capability-token", "--ws-token-file", file], {
        env: { PATH: "/usr/bin:/bin", HOME: home, CODEX_HOME: codexHome },
        stdin: "ignore",
        stdout: "pipe",
        stderr: "pipe",
      });
      const reader = es.stdout.getReader();
      await reader.read(); // the URL line: start-up is over
      es.kill("SIGTERM");
      await es.exited;
      said.push(await new Response(es.stderr).text());
    }
    expect(said[0]).toContain(`warning: ${tokenFile}: it lies outside CODEX_HOME`);
    expect(said[1]).not.toContain("warning");
  }, 30_000);

  for (const shape of ["profile", "sandboxPolicy"] as const)
    test(`${shape}: the --ws-token-file, the credential stores and auth.json are unreadable; the rest of HOME is read`, async () => {
      const c = await ExecClient.connect(server.url);
      await c.init();
      const sandbox =
        shape === "profile"
          ? workspaceWrite(proj)
          : { sandboxPolicy: { type: "workspace-write", network_access: true }, sandboxPolicyCwd: proj, windowsSandboxLevel: "disabled" };
      await c.call("process/start", {
        processId: shape,
        argv: ["/bin/sh", "-c", READ],
        cwd: `file://${proj}`,
        env: { PATH: "/usr/bin:/bin", HOME: home },
        tty: false,
        sandbox,
      });
      const { output, exitCode } = await c.collect(shape);
      c.close();
      expect(exitCode).toBe(0);
      expect({ output, leaked: output.includes(TOKEN) || output.includes(SECRET) }).toEqual({ output, leaked: false });
      expect(output).toContain(`${tokenFile} unreadable`);
      expect(output).toContain(`${join(codexHome, "auth.json")} unreadable`);
      expect(output).toContain("PLAIN notes");
    }, 60_000);
});
