/**
 * config.toml and `-c` overrides through smol-toml (TOML 1.0): the Codex configs the `toml` package refused,
 * unknown keys ignored, invalid TOML named by file, line and column, and rules discovery seeing `-c` overrides.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { applyEnvironmentPolicy, loadConfig, parseKeyPath, parseOverride, shellEnvironmentPolicy } from "../../src/config/config.ts";
import { ShellmcpError } from "../../src/errors.ts";
import { discoverRulesFiles, trustedProjects } from "../../src/execpolicy/discovery.ts";

let dir: string;
beforeAll(() => {
  dir = realpathSync(mkdtempSync(join(tmpdir(), "shellmcp-config-")));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function home(name: string, text: string): string {
  const h = join(dir, name);
  mkdirSync(h, { recursive: true });
  writeFileSync(join(h, "config.toml"), text);
  return h;
}

/** A Codex 0.169-style config: dotted keys, inline tables, arrays of tables, dates, mixed arrays. */
const CODEX_CONFIG = `
model = "gpt-5.1-codex"
model_provider = "mock"
approval_policy = "never"
sandbox_mode = "workspace-write"
features.shell_tool = false
features.web_search_request = true
notify = ["notify-send", "Codex"]
mixed = [1, "two", { three = 3 }]
last_updated = 2026-11-22T14:30:00Z
birthday = 1979-05-27
wake = 07:32:00

[model_providers.mock]
name = "mock"
base_url = "http://127.0.0.1:9/v1"
wire_api = "responses"

[mcp_servers.shell]
command = "shellmcp"
args = ["serve"]
env = { CODEX_HOME = "/tmp/x" }
required = true
default_tools_approval_mode = "approve"

[[profiles.fast.hooks]]
name = "a"
[[profiles.fast.hooks]]
name = "b"

[shell_environment_policy]
inherit = "core"
set = { FOO = "bar" }

[projects."/work/a.b"]
trust_level = "trusted"
`;

describe("loadConfig", () => {
  test("a Codex config with dotted keys, inline tables, arrays of tables and dates loads", () => {
    const cfg = loadConfig(home("codex", CODEX_CONFIG));
    expect((cfg.features as Record<string, unknown>).shell_tool).toBe(false);
    expect(((cfg.mcp_servers as Record<string, Record<string, unknown>>).shell!.env as Record<string, string>).CODEX_HOME).toBe("/tmp/x");
    expect(((cfg.profiles as Record<string, Record<string, unknown[]>>).fast!.hooks as { name: string }[]).map((h) => h.name)).toEqual([
      "a",
      "b",
    ]);
    expect(cfg.last_updated instanceof Date && (cfg.last_updated as Date).toISOString()).toBe("2026-11-22T14:30:00.000Z");
    expect((cfg.birthday as Date).toISOString()).toBe("1979-05-27");
    expect(cfg.wake instanceof Date).toBe(true);
    expect(cfg.mixed).toEqual([1, "two", { three: 3 }]);
    // Unknown keys are ignored; the table shellmcp reads is read.
    const env = applyEnvironmentPolicy(shellEnvironmentPolicy(cfg), { PATH: "/bin", HOME: "/h", OTHER: "x" });
    expect(env).toEqual({ PATH: "/bin", HOME: "/h", FOO: "bar" });
  });

  test("a missing file is an empty config", () => {
    const h = join(dir, "empty");
    mkdirSync(h);
    expect(loadConfig(h)).toEqual({});
  });

  test("invalid TOML names the file, line and column", () => {
    const h = home("bad", 'model = "x"\n[features]\nshell_tool = fals\n');
    let err: unknown;
    try {
      loadConfig(h);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ShellmcpError);
    expect((err as ShellmcpError).code).toBe("CONFIG");
    expect((err as ShellmcpError).message).toMatch(new RegExp(`^cannot parse ${join(h, "config.toml").replaceAll("/", "\\/")}:3:\\d+: `));
    expect((err as ShellmcpError).message).not.toContain("\n");
    expect((err as ShellmcpError).data.line).toBe(3);
  });

  test("-c overrides: TOML values, bare words as strings, dotted and quoted keys, applied over the file", () => {
    const cfg = loadConfig(home("ov", CODEX_CONFIG), [
      'shell_environment_policy.inherit="all"',
      "features.shell_tool=true",
      "model=o3",
      'projects."/p/x.y".trust_level="trusted"',
      "a.b.c=[1, 2]",
    ]);
    expect((cfg.shell_environment_policy as Record<string, unknown>).inherit).toBe("all");
    expect((cfg.shell_environment_policy as Record<string, unknown>).set).toEqual({ FOO: "bar" });
    expect((cfg.features as Record<string, unknown>).shell_tool).toBe(true);
    expect(cfg.model).toBe("o3");
    expect((cfg.projects as Record<string, unknown>)["/p/x.y"]).toEqual({ trust_level: "trusted" });
    expect(cfg.a).toEqual({ b: { c: [1, 2] } });
  });

  test("bad overrides are refused", () => {
    expect(() => parseOverride("novalue")).toThrow("expected key=value");
    expect(() => parseOverride("=1")).toThrow("expected key=value");
    expect(() => parseKeyPath("a..b")).toThrow("invalid -c override key");
    expect(parseKeyPath('projects."/a.b".x')).toEqual(["projects", "/a.b", "x"]);
  });
});

describe("rules discovery sees the parsed config", () => {
  test("a project trusted only through -c is trusted", () => {
    const proj = join(dir, "proj");
    mkdirSync(join(proj, ".git"), { recursive: true });
    mkdirSync(join(proj, ".codex", "rules"), { recursive: true });
    writeFileSync(join(proj, ".codex", "rules", "default.rules"), 'prefix_rule(pattern = ["ls"], decision = "allow")\n');
    const h = home("trust", 'model = "x"\n');
    expect(trustedProjects(h).size).toBe(0);
    const files = (cfg: Record<string, unknown> | undefined) =>
      discoverRulesFiles({ codexHome: h, cwd: proj, systemDir: join(dir, "nosys"), config: cfg }).filter((f) => f.layer === "project");
    expect(files(undefined)).toEqual([]);
    const cfg = loadConfig(h, [`projects."${proj}".trust_level="trusted"`]);
    expect(trustedProjects(h, cfg)).toEqual(new Set([proj]));
    expect(files(cfg).map((f) => f.path)).toEqual([join(proj, ".codex", "rules", "default.rules")]);
  });

  test("trusted projects from the file itself (dotted keys and all)", () => {
    const h = home("trust2", CODEX_CONFIG);
    expect(trustedProjects(h)).toEqual(new Set(["/work/a.b"]));
  });
});
