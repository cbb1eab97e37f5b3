/**
 * Codex's `shell_environment_policy` (src/config/config.ts): reading the table (defaults, validation) and
 * applying it to an environment in Codex's order — start set, default excludes, `exclude`, `set`,
 * `include_only` — with case-insensitive glob patterns (docs/sandbox.md, "Environment").
 */
import { describe, expect, test } from "bun:test";
import { applyEnvironmentPolicy, CORE_VARS, shellEnvironmentPolicy, type ShellEnvironmentPolicy } from "../../src/config/config.ts";
import { DEFAULT_EXCLUDES } from "../../src/config/env-policy.ts";
import { ShellmcpError } from "../../src/errors.ts";

const ENV = {
  HOME: "/root",
  PATH: "/usr/bin:/bin",
  LANG: "C.UTF-8",
  MY_API_KEY: "k",
  FOO_TOKEN: "t",
  my_secret_x: "s",
  KEYBOARD: "us",
  PLAIN: "p",
  EDITOR: "vi",
  UNSET: undefined,
};

const policy = (table: Record<string, unknown> = {}): ShellEnvironmentPolicy => shellEnvironmentPolicy({ shell_environment_policy: table });
const apply = (table: Record<string, unknown>, env: Record<string, string | undefined> = ENV) => applyEnvironmentPolicy(policy(table), env);

describe("shellEnvironmentPolicy (reading the table)", () => {
  test("defaults: inherit all, default excludes on (safer than current Codex), no patterns, nothing set", () => {
    expect(shellEnvironmentPolicy({})).toEqual({ inherit: "all", ignoreDefaultExcludes: false, exclude: [], set: {}, includeOnly: [] });
  });

  test("reads every field", () => {
    expect(policy({ inherit: "core", ignore_default_excludes: true, exclude: ["A*"], set: { X: "1" }, include_only: ["P*"] })).toEqual({
      inherit: "core",
      ignoreDefaultExcludes: true,
      exclude: ["A*"],
      set: { X: "1" },
      includeOnly: ["P*"],
    });
  });

  test.each([
    [{ inherit: "some" }, /inherit must be "all", "core" or "none"/],
    [{ exclude: "A*" }, /exclude must be a list of strings/],
    [{ include_only: [1] }, /include_only must be a list of strings/],
    [{ set: ["X"] }, /set must be a table/],
    [{ set: { X: 1 } }, /set\.X must be a string/],
    [{ ignore_default_excludes: "yes" }, /ignore_default_excludes must be a boolean/],
  ])("rejects %j with a CONFIG error", (table, message) => {
    let err: unknown;
    try {
      policy(table);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ShellmcpError);
    expect((err as ShellmcpError).code).toBe("CONFIG");
    expect((err as Error).message).toMatch(message);
  });
});

describe("applyEnvironmentPolicy", () => {
  test("default: everything but names matching the default excludes (case-insensitive; KEYBOARD too)", () => {
    expect(DEFAULT_EXCLUDES).toEqual([
      "*KEY*",
      "*SECRET*",
      "*TOKEN*",
      "*PASSWORD*",
      "*PASSWD*",
      "*PASSPHRASE*",
      "*_PWD",
      "*_PASS",
      "*_PAT",
      "*CREDENTIAL*",
      "*AUTH*",
    ]);
    expect(apply({})).toEqual({ HOME: "/root", PATH: "/usr/bin:/bin", LANG: "C.UTF-8", PLAIN: "p", EDITOR: "vi" });
  });

  test("ignore_default_excludes = true keeps them (Codex's current default)", () => {
    const { UNSET: _, ...defined } = ENV;
    expect(apply({ ignore_default_excludes: true })).toEqual(defined);
  });

  test('inherit = "core" keeps only the core variables', () => {
    expect(CORE_VARS).toContain("PATH");
    expect(apply({ inherit: "core" })).toEqual({ HOME: "/root", PATH: "/usr/bin:/bin", LANG: "C.UTF-8" });
  });

  test('inherit = "none" starts empty; set still adds', () => {
    expect(apply({ inherit: "none" })).toEqual({});
    expect(apply({ inherit: "none", set: { A: "1" } })).toEqual({ A: "1" });
  });

  test("exclude patterns are case-insensitive globs (* and ?)", () => {
    expect(apply({ exclude: ["edit?r", "la*"] })).toEqual({ HOME: "/root", PATH: "/usr/bin:/bin", PLAIN: "p" });
  });

  test("set overrides and is not filtered by the excludes", () => {
    expect(apply({ set: { PATH: "/opt/bin", GH_TOKEN: "x" } })).toMatchObject({ PATH: "/opt/bin", GH_TOKEN: "x" });
  });

  test("include_only comes last: it can drop set entries and PATH", () => {
    expect(apply({ set: { A: "1", PLAIN2: "q" }, include_only: ["pl*"] })).toEqual({ PLAIN: "p", PLAIN2: "q" });
  });

  test("issue 30: passwords, PATs, credentials, auth and URLs with user-info go; PWD, OLDPWD, GIT_AUTHOR_* stay", () => {
    const env = {
      PGPASSWORD: "a",
      MYSQL_PWD: "b",
      GITHUB_PAT: "c",
      db_pass: "d",
      GPG_PASSPHRASE: "e",
      GOOGLE_APPLICATION_CREDENTIALS: "f",
      XAUTHORITY: "g",
      SSH_AUTH_SOCK: "h",
      DATABASE_URL: "postgres://u:p@h/db",
      CLONE: "https://tok@github.com/o/r",
      PWD: "/w",
      OLDPWD: "/v",
      GIT_AUTHOR_NAME: "Ada",
      PATH_URL: "https://example.org/a@b",
      PLAIN_URL: "https://example.org/",
      PATH: "/bin",
    };
    expect(apply({}, env)).toEqual({
      PWD: "/w",
      OLDPWD: "/v",
      GIT_AUTHOR_NAME: "Ada",
      PATH_URL: "https://example.org/a@b",
      PLAIN_URL: "https://example.org/",
      PATH: "/bin",
    });
    expect(apply({ ignore_default_excludes: true }, env)).toEqual(env);
  });

  test("undefined values are skipped and the input is not modified", () => {
    const env = { ...ENV };
    const out = apply({}, env);
    expect("UNSET" in out).toBe(false);
    expect(env).toEqual(ENV);
  });
});
