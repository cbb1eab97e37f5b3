/**
 * Codex's `shell_environment_policy` (src/config/config.ts): reading the table (defaults, validation) and
 * applying it to an environment in Codex's order — start set, default excludes, `exclude`, `set`,
 * `include_only` — with case-insensitive glob patterns (docs/sandbox.md, "Environment").
 */
import { describe, expect, test } from "bun:test";
import { applyEnvironmentPolicy, CORE_VARS, shellEnvironmentPolicy, type ShellEnvironmentPolicy } from "../../src/config/config.ts";
import picomatch from "picomatch";
import { anyGlob, DEFAULT_EXCLUDES, globMatcher } from "../../src/config/env-policy.ts";
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

/**
 * The patterns Codex documents for `shell_environment_policy` (its config docs: `exclude = ["AWS_*", "AZURE_*"]`,
 * `include_only = ["PATH", "HOME"]`, the default `*KEY*`, `*SECRET*`, `*TOKEN*`, and the names its own tests and
 * our observation of 0.169 use), with the names each must and must not match. Codex matches with the `wildmatch`
 * crate, case-insensitively: whole name, `*` any run (empty included), `?` one character, nothing else special.
 */
const CODEX_PATTERNS: readonly [pattern: string, name: string, matches: boolean][] = [
  ["AWS_*", "AWS_PROFILE", true],
  ["AWS_*", "aws_region", true],
  ["AWS_*", "AWS_", true],
  ["AWS_*", "MY_AWS_X", false],
  ["AZURE_*", "AZURE_CLIENT_ID", true],
  ["AZURE_*", "AZURE", false],
  ["PATH", "PATH", true],
  ["PATH", "path", true],
  ["PATH", "PATHEXT", false],
  ["PATH", "MANPATH", false],
  ["HOME", "HOME", true],
  ["HOME", "CODEX_HOME", false],
  ["*KEY*", "MY_API_KEY", true],
  ["*KEY*", "KEYBOARD", true],
  ["*KEY*", "key", true],
  ["*KEY*", "KEx", false],
  ["*SECRET*", "my_secret_x", true],
  ["*TOKEN*", "FOO_TOKEN", true],
  ["*TOKEN*", "PLAIN", false],
  ["*_PWD", "MYSQL_PWD", true],
  ["*_PWD", "PWD", false],
  ["A?C", "ABC", true],
  ["A?C", "AC", false],
  ["A?C", "ABBC", false],
  ["*", "ANY_NAME", true],
];

/** Names where Codex's meaning and picomatch's part ways (the closest options: see {@link PICOMATCH_OPTIONS}). */
const NOT_PICOMATCH: readonly [pattern: string, name: string, codex: boolean][] = [
  ["A?B", "A/B", true], // picomatch: `?` never matches a path separator
  ["*KEY*", "X\nKEY", true], // picomatch (bash mode): `*` never matches a newline
  ["[A-Z]*", "AWS", false], // picomatch: a character class; Codex: `[` is literal
  ["[A-Z]*", "[A-Z]X", true],
];

/** picomatch's options closest to Codex's meaning: case-insensitive, dot names, `*` across `/`, no braces, extglobs or `!`. */
const PICOMATCH_OPTIONS = { nocase: true, dot: true, bash: true, nobrace: true, noextglob: true, nonegate: true } as const;

describe("patterns: Codex's meaning (wildmatch, case-insensitive, whole name)", () => {
  test.each([...CODEX_PATTERNS, ...NOT_PICOMATCH])("%p against %p: %p", (pattern, name, matches) => {
    expect(globMatcher(pattern).test(name)).toBe(matches);
    expect(anyGlob([pattern])(name)).toBe(matches);
    // Through the policy too: as `exclude` it drops the name exactly when it matches, as `include_only` it keeps it.
    expect(Object.keys(apply({ ignore_default_excludes: true, exclude: [pattern] }, { [name]: "v" }))).toEqual(matches ? [] : [name]);
    expect(Object.keys(apply({ ignore_default_excludes: true, include_only: [pattern] }, { [name]: "v" }))).toEqual(matches ? [name] : []);
  });

  test("every other character is literal: regex syntax, brackets, braces, `!`, a backslash", () => {
    for (const p of ["A.B", "A+", "(A)", "A|B", "^A$", "[AB]", "{A,B}", "!A", "A\\B"]) {
      expect(globMatcher(p).test(p)).toBe(true);
    }
    expect(globMatcher("A.B").test("AXB")).toBe(false);
    expect(globMatcher("[AB]").test("A")).toBe(false);
    expect(globMatcher("{A,B}").test("A")).toBe(false);
    expect(globMatcher("!A").test("B")).toBe(false);
    expect(globMatcher("A\\B").test("AB")).toBe(false);
  });

  test("an empty pattern matches only an empty name; an empty list matches nothing", () => {
    expect(globMatcher("").test("")).toBe(true);
    expect(globMatcher("").test("A")).toBe(false);
    expect(anyGlob([])("A")).toBe(false);
  });

  test('where picomatch differs: why the policy does not match with it (docs/sandbox.md, "Environment")', () => {
    for (const [pattern, name, codex] of NOT_PICOMATCH) {
      expect(globMatcher(pattern).test(name)).toBe(codex);
      expect(picomatch(pattern, PICOMATCH_OPTIONS)(name)).toBe(!codex);
    }
    // `*` matches the empty name for Codex, not for picomatch; an empty pattern throws there.
    expect(globMatcher("*").test("")).toBe(true);
    expect(picomatch("*", PICOMATCH_OPTIONS)("")).toBe(false);
    expect(() => picomatch("", PICOMATCH_OPTIONS)).toThrow();
    // Where it agrees: every documented pattern.
    for (const [pattern, name, matches] of CODEX_PATTERNS) expect(picomatch(pattern, PICOMATCH_OPTIONS)(name)).toBe(matches);
  });
});
