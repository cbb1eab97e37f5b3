/**
 * Issue 31: the server's default timeout is visible (the `shell` tool's description states it and points long work
 * to a session) and settable (`serve --default-timeout-ms`, `[shellmcp] default_timeout_ms`), while the input
 * schema stays Codex's byte for byte. Compiled binary, MCP SDK client.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CONF_BASE } from "../helpers/test-dirs.ts";
import { startServe, type Session } from "../helpers/mcp.ts";
import { shellsMissing } from "../helpers/shells.ts";
import { skipWithout } from "../helpers/prereq.ts";

const skip = skipWithout("default timeout suite", shellsMissing());
const sessions: Session[] = [];
afterAll(async () => {
  for (const s of sessions) await s.close().catch(() => undefined);
});

/** A CODEX_HOME outside every writable root with `config` as its config.toml. */
function homeWith(config: string): string {
  const d = join(CONF_BASE, `home-to-${Math.random().toString(36).slice(2)}`);
  mkdirSync(d, { recursive: true });
  writeFileSync(join(d, "config.toml"), config);
  return d;
}

async function serve(args: string[], config = ""): Promise<Session> {
  const s = await startServe({ args, codexHome: homeWith(config) });
  sessions.push(s);
  return s;
}

async function description(s: Session): Promise<string> {
  const { tools } = await s.client.listTools();
  return tools.find((t) => t.name === "shell")!.description!;
}

describe.skipIf(skip)("the default timeout of `shell`", () => {
  test("the description states Codex's default (10000 ms) and points long work to exec_command", async () => {
    const s = await serve([]);
    const d = await description(s);
    expect(d.startsWith("Runs a shell command and returns its output. You MUST provide the workdir as an absolute path.")).toBe(true);
    expect(d).toContain("stopped after 10000 ms");
    expect(d).toContain("exec_command");
  });

  test("--default-timeout-ms: listed, and a call without timeout_ms is stopped at it", async () => {
    const s = await serve(["--default-timeout-ms", "1000"]);
    expect(await description(s)).toContain("stopped after 1000 ms");
    const r = await s.shell({ command: "sleep 5; echo finished", workdir: "/", login: false });
    expect(r.out.timed_out).toBe(true);
    expect(r.out.output).not.toContain("finished");
    // timeout_ms still wins over the default.
    const longer = await s.shell({ command: "sleep 2; echo finished", workdir: "/", login: false, timeout_ms: 60_000 });
    expect(longer.out).toMatchObject({ timed_out: false, exit_code: 0, output: "finished\n" });
  });

  test("[shellmcp] default_timeout_ms in config.toml, and the flag overrides it", async () => {
    const s = await serve([], "[shellmcp]\ndefault_timeout_ms = 1000\n");
    expect(await description(s)).toContain("stopped after 1000 ms");
    expect((await s.shell({ command: "sleep 5", workdir: "/", login: false })).out.timed_out).toBe(true);
    const t = await serve(["--default-timeout-ms", "120000"], "[shellmcp]\ndefault_timeout_ms = 1000\n");
    expect(await description(t)).toContain("stopped after 120000 ms (2 minutes)");
    expect((await t.shell({ command: "sleep 2; echo ok", workdir: "/", login: false })).out).toMatchObject({
      timed_out: false,
      output: "ok\n",
    });
  });

  test("a bad value fails every call with the key and how to fix it", async () => {
    const s = await serve([], '[shellmcp]\ndefault_timeout_ms = "long"\n');
    const text = async (t: Session) =>
      JSON.stringify(await t.client.callTool({ name: "shell", arguments: { command: "true", workdir: "/" } }));
    expect(await text(s)).toContain("shellmcp.default_timeout_ms must be a whole number of milliseconds");
    expect(await text(await serve(["--default-timeout-ms", "0"]))).toContain("--default-timeout-ms must be a whole number");
  });
});
