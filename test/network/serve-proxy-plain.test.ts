/**
 * Issue 31, item 2: a client that sends no sandbox state (Claude Code, Gemini CLI, the Inspector) gets the network
 * its configured permission profile says: `default_permissions` with `network.enabled = true`, `[features]
 * network_proxy = true` and an allow-list give proxy mode, as a Codex client would get. Local servers only: the
 * server runs under an outer bubblewrap whose /etc/hosts maps the test names to 127.0.0.1 (as serve-proxy.test.ts).
 */
import { CONF_BASE, RUN_TMP } from "../helpers/test-dirs.ts";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ensureBinary } from "../helpers/binary.ts";
import { closeAll, serveWithPid, type AttackSession } from "../helpers/attack.ts";
import { shellsMissing } from "../helpers/shells.ts";
import { skipWithout, toolMissing } from "../helpers/prereq.ts";
import { agentNetworkConfig } from "../helpers/network.ts";
import { landlockAbi } from "../../src/sandbox/linux/landlock.ts";

const skip = skipWithout("plain-client network suite", shellsMissing() ?? toolMissing("bwrap", "curl"));
let upstream: ReturnType<typeof Bun.serve>;
let port: number;
let hosts: string;

beforeAll(() => {
  upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: (req) => new Response(`hello ${req.headers.get("host")}\n`) });
  port = upstream.port!;
  hosts = join(RUN_TMP, "hosts.plain");
  writeFileSync(hosts, "127.0.0.1 localhost\n127.0.0.1 allowed.test\n127.0.0.1 other.test\n");
});
afterAll(async () => {
  await closeAll();
  await upstream.stop(true);
});

/** A server for a client that never sends a sandbox state: `config` in its CODEX_HOME, started in a workspace. */
async function plainServe(config: string, backend: "bwrap" | "landlock"): Promise<AttackSession & { ws: string }> {
  const codexHome = join(CONF_BASE, `home-${Math.random().toString(36).slice(2)}`);
  mkdirSync(codexHome, { recursive: true });
  writeFileSync(join(codexHome, "config.toml"), config);
  const ws = join(CONF_BASE, `plain-${Math.random().toString(36).slice(2)}`);
  mkdirSync(ws, { recursive: true });
  const s = await serveWithPid({
    codexHome,
    command: ["bwrap", "--dev-bind", "/", "/", "--bind", hosts, "/etc/hosts", "--", ensureBinary()],
    args: ["--sandbox", "workspace-write", "--sandbox-backend", backend, "--cd", ws],
  });
  return Object.assign(s, { ws });
}

const CONFIG = agentNetworkConfig({ allowLocalBinding: true, domains: { "allowed.test": "allow" } });

describe.skipIf(skip)("network from the server's configuration, for a client without sandbox state", () => {
  for (const backend of ["bwrap", "landlock"] as const) {
    // Proxy mode under Landlock needs TCP port rules (ABI ≥ 4); below, serve refuses it (serve-proxy.test.ts).
    test.skipIf(backend === "landlock" && landlockAbi() < 4)(
      `${backend}: an allowed name is reached through the proxy, another is refused with the reason`,
      async () => {
        const s = await plainServe(CONFIG, backend);
        const r = await s.shell({
          command: `curl -sS http://allowed.test:${port}/; curl -sS -o /dev/null -w '%{http_code}\\n' http://other.test:${port}/; echo "active=$CODEX_NETWORK_PROXY_ACTIVE"`,
          workdir: s.ws,
          login: false,
          timeout_ms: 60_000,
        });
        expect(r.out.output).toContain(`hello allowed.test:${port}\n`);
        expect(r.out.output).toContain("403\n");
        expect(r.out.output).toContain("active=1\n");
        expect(r.out.output).toContain(`shellmcp: network access refused: other.test:${port} (http): not_allowed`);
      },
    );
  }

  test("a session (exec_command) gets the same proxy: the allowed name answers, another is refused", async () => {
    const s = await plainServe(CONFIG, "bwrap");
    const r = await s.client.callTool({
      name: "exec_command",
      arguments: {
        cmd: `curl -sS http://allowed.test:${port}/; curl -sS -o /dev/null -w '%{http_code}\\n' http://other.test:${port}/`,
        workdir: s.ws,
        login: false,
        yield_time_ms: 30_000,
      },
    });
    const text = (r.content as { text: string }[])[0]!.text;
    expect(text).toContain("Process exited with code 0");
    expect(text).toContain(`hello allowed.test:${port}\n403\n`);
    expect(text).toContain(`shellmcp: network access refused: other.test:${port} (http): not_allowed`);
  });

  test("without network in the profile, a plain client's network stays off", async () => {
    const s = await plainServe(CONFIG.replace("enabled = true", "enabled = false"), "bwrap");
    const r = await s.shell({ command: `curl -sS http://allowed.test:${port}/; echo "exit=$?"`, workdir: s.ws, login: false });
    expect(r.out.output).not.toContain("hello");
    expect(r.out.output).toMatch(/exit=[1-9]/);
  });
});
