/**
 * Issue 30, item 6: secrets under their common names never reach a command by default. The compiled `serve`
 * starts with them in its environment; `env` run through the `shell` tool must not show them, while ordinary
 * variables (`PWD`, `GIT_AUTHOR_NAME`, a URL without user-info) still pass. `ignore_default_excludes = true`
 * (Codex's `shell_environment_policy`) brings them back; `exclude` and `set` keep their meaning.
 */
import { CONF_BASE } from "../helpers/cleanup.ts";
import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { startServe, type Session } from "../helpers/mcp.ts";
import { shellsMissing } from "../helpers/shells.ts";
import { skipWithout } from "../helpers/prereq.ts";
import { ensureBinary } from "../helpers/binary.ts";
import { ExecClient } from "../exec-server/client.ts";
import { startServer, type StartedServer } from "../exec-server/codex-harness.ts";

const skip = skipWithout("secret-env suite", shellsMissing());

/** Variables the server starts with that are secrets by their names or values. */
const SECRETS: Record<string, string> = {
  PGPASSWORD: "pg-secret-1",
  DATABASE_URL: "postgres://app:db-secret-2@db.internal:5432/app",
  MYSQL_PWD: "my-secret-3",
  GITHUB_PAT: "ghp_secret4",
  DOCKER_PASSWORD: "docker-secret-5",
  LDAP_PASSWD: "ldap-secret-6",
  AWS_SHARED_CREDENTIALS_FILE: "/nowhere/credentials-7",
  NPM_AUTH: "npm-secret-8",
  MIRROR: "see https://ci-bot:mirror-secret-9@git.example/repo.git",
};
/** Variables that look close to a default exclude but are not secrets. */
const KEPT: Record<string, string> = {
  GIT_AUTHOR_NAME: "Ada",
  HOMEPAGE_URL: "https://example.org/x@y",
  SHELLMCP_PLAIN: "plain-value",
};

const sessions: Session[] = [];
const servers: StartedServer[] = [];
afterAll(async () => {
  for (const s of sessions) await s.close().catch(() => undefined);
  for (const s of servers) await s.stop();
});

async function envOfACall(config?: string): Promise<string> {
  const home = mkdtempSync(join(CONF_BASE, "h4-env-"));
  if (config !== undefined) writeFileSync(join(home, "config.toml"), config);
  const ws = join(home, "ws");
  mkdirSync(ws);
  const s = await startServe({ codexHome: home, env: { ...SECRETS, ...KEPT } });
  sessions.push(s);
  const { out } = await s.shell({ command: "env; echo PWD=$PWD", workdir: ws, login: false });
  expect(out.exit_code).toBe(0);
  return out.output;
}

describe.skipIf(skip)("default excludes through the compiled binary", () => {
  test("passwords, PATs, credentials, auth and URLs with user-info are absent; PWD and look-alikes stay", async () => {
    const out = await envOfACall();
    for (const [k, v] of Object.entries(SECRETS)) {
      expect(out).not.toContain(`${k}=`);
      expect(out).not.toContain(v);
    }
    for (const [k, v] of Object.entries(KEPT)) expect(out).toContain(`${k}=${v}\n`);
    expect(out).toMatch(/^PWD=\//m);
  });

  test("ignore_default_excludes = true brings them back; exclude and set still apply", async () => {
    const out = await envOfACall(
      '[shell_environment_policy]\nignore_default_excludes = true\nexclude = ["MYSQL_*"]\nset = { SHELLMCP_SET = "s1" }\n',
    );
    for (const [k, v] of Object.entries(SECRETS)) {
      if (k === "MYSQL_PWD") expect(out).not.toContain(v);
      else expect(out).toContain(`${k}=${v}\n`);
    }
    expect(out).toContain("SHELLMCP_SET=s1\n");
  });
});

describe("exec-server's envPolicy uses the same default excludes (compiled binary)", () => {
  test("ignoreDefaultExcludes: false drops them; true keeps them", async () => {
    const server = await startServer([ensureBinary(), "exec-server"], { ...process.env, ...SECRETS, ...KEPT });
    servers.push(server);
    const c = await ExecClient.connect(server.url);
    await c.init();
    const envOf = async (id: string, ignoreDefaultExcludes: boolean) => {
      const envPolicy = { inherit: "all", ignoreDefaultExcludes, exclude: [], set: {}, includeOnly: [] };
      await c.call("process/start", { processId: id, argv: ["/usr/bin/env"], cwd: "/", env: {}, envPolicy, tty: false });
      return (await c.collect(id)).output;
    };
    const filtered = await envOf("filtered", false);
    for (const [k, v] of Object.entries(SECRETS)) (expect(filtered).not.toContain(v), expect(filtered).not.toContain(`${k}=`));
    for (const [k, v] of Object.entries(KEPT)) expect(filtered).toContain(`${k}=${v}\n`);
    const all = await envOf("all", true);
    for (const [k, v] of Object.entries(SECRETS)) expect(all).toContain(`${k}=${v}\n`);
    c.close();
  });
});
