/**
 * The Starlark subset and every error path of the rules loader: messages and file:line:col.
 */
import { describe, expect, test } from "bun:test";
import { RulesError, policyFromSources } from "../../src/execpolicy/load.ts";

function load(...texts: string[]) {
  return policyFromSources(texts.map((text, i) => ({ path: `/rules/f${i}.rules`, text })));
}
function loadError(...texts: string[]): RulesError {
  try {
    load(...texts);
  } catch (e) {
    if (e instanceof RulesError) return e;
    throw e;
  }
  throw new Error("expected the rules to fail to load");
}

describe("language", () => {
  test("comments, both quote styles, triple quotes, escapes, raw strings, trailing commas, multi-line calls", () => {
    const p = load(`# a comment
prefix_rule(
    pattern = ['echo', "a\\tb", """tri"ple""", r"raw\\n", '\\x41\\u00e9'],  # trailing comment
    decision = "prompt",
)
`);
    expect(p.check(["echo", "a\tb", 'tri"ple', "raw\\n", "Aé"]).decision).toBe("prompt");
  });

  test("variables, + on lists and strings, list comprehensions, positional arguments", () => {
    const p = load(`SHELLS = ["bash", "zsh"]
FLAGS = ["-c"] + ["-lc"]
NAME = "gi" + "t"
prefix_rule([SHELLS + ["sh"], FLAGS], "forbidden")
prefix_rule([NAME, [s.upper() for s in ["x", "y"] if s != "y"]], decision = "allow")
`);
    expect(p.check(["sh", "-lc", "x"]).decision).toBe("forbidden");
    expect(p.check(["zsh", "-c"]).decision).toBe("forbidden");
    expect(p.check(["git", "X"]).decision).toBe("allow");
    expect(p.check(["git", "Y"]).decision).toBeUndefined();
  });

  test("def with return, lambda, top-level for and if, tuples, dicts, f-strings, % formatting", () => {
    const p = load(`def deny(*words, why = None):
    if why:
        return prefix_rule(pattern = list(words), decision = "forbidden", justification = why)
    prefix_rule(pattern = list(words), decision = "forbidden")

TOOLS = {"npm": "publish", "cargo": "publish"}
for tool, sub in TOOLS.items():
    deny(tool, sub, why = f"{tool} {sub} needs a human")
pair = ("git", "push")
if len(pair) == 2 and pair[0] == "git":
    deny(pair[0], pair[1])
else:
    fail("unreachable")
twice = lambda s: s * 2
prefix_rule(pattern = [twice("ab")], decision = "prompt", justification = "%s-%d" % ("x", 3))
`);
    expect(p.check(["npm", "publish"])).toEqual({
      matchedRules: [
        { prefixRuleMatch: { matchedPrefix: ["npm", "publish"], decision: "forbidden", justification: "npm publish needs a human" } },
      ],
      decision: "forbidden",
    });
    expect(p.check(["git", "push", "--force"]).decision).toBe("forbidden");
    expect(p.check(["abab"]).matchedRules).toEqual([
      { prefixRuleMatch: { matchedPrefix: ["abab"], decision: "prompt", justification: "x-3" } },
    ]);
  });

  test("each file has its own scope", () => {
    const e = loadError(`X = ["ls"]\nprefix_rule(pattern = X)\n`, `prefix_rule(pattern = X)\n`);
    expect(e.message).toContain("failed to parse policy at /rules/f1.rules");
    expect(e.message).toContain("Variable `X` not found");
  });

  test("rules are reported in file order, then statement order; strictest wins", () => {
    const p = load(
      `prefix_rule(pattern = ["git"], decision = "prompt")\n`,
      `prefix_rule(pattern = ["git", "status"], decision = "allow")\n`,
    );
    const e = p.check(["git", "status"]);
    expect(e.decision).toBe("prompt");
    expect(e.matchedRules.map((m) => ("prefixRuleMatch" in m ? m.prefixRuleMatch.matchedPrefix.length : 0))).toEqual([1, 2]);
  });

  test("network_rule is parsed and compiled into allow/deny lists", () => {
    const p = load(`network_rule(host = "Example.COM.", protocol = "https", decision = "allow")
network_rule(host = "[::1]:8080", protocol = "http-connect", decision = "deny")
network_rule(host = "example.com:443", protocol = "http", decision = "deny")
`);
    expect(p.networkRules.map((r) => [r.host, r.protocol, r.decision])).toEqual([
      ["example.com", "https", "allow"],
      ["::1", "https", "forbidden"],
      ["example.com", "http", "forbidden"],
    ]);
    expect(p.networkLists()).toEqual({ allowed: [], denied: ["::1", "example.com"] });
  });
});

describe("error paths name file, line, column and the problem", () => {
  const cases: [string, string, string, number][] = [
    ["unterminated string", `prefix_rule(pattern = ["git\n`, "unterminated string literal", 1],
    ["unterminated triple-quoted string", `X = 1\nY = """abc\n`, "unterminated triple-quoted string literal", 2],
    [
      "bad indent",
      `prefix_rule(pattern = ["a"])\n  prefix_rule(pattern = ["b"])\n`,
      "Parse error: unexpected new indentation block, expected expression",
      2,
    ],
    ["inconsistent dedent", `if True:\n    X = 1\n  Y = 2\n`, "unindent does not match any outer indentation level", 3],
    ["unknown builtin", `\n\nallow_rule(pattern = ["ls"])\n`, "Variable `allow_rule` not found", 3],
    ["print is not a builtin", `print("x")\n`, "Variable `print` not found", 1],
    [
      "wrong argument type",
      `prefix_rule(pattern = "git status")\n`,
      'Type of parameter `pattern` doesn\'t match, expected `list`, actual `string (repr: "git status")`',
      1,
    ],
    [
      "wrong decision type",
      `prefix_rule(pattern = ["a"], decision = 1)\n`,
      "Type of parameter `decision` doesn't match, expected `str`, actual `int (repr: 1)`",
      1,
    ],
    ["bad decision", `X = 1\nprefix_rule(pattern = ["rm"], decision = "deny")\n`, "invalid decision: deny", 2],
    [
      "unknown keyword",
      `prefix_rule(pattern = ["ls"], description = "x")\n`,
      "Found `description` extra named parameter(s) for call to prefix_rule",
      1,
    ],
    ["missing pattern", `prefix_rule(decision = "allow")\n`, "Missing parameter `pattern` for call to `prefix_rule`", 1],
    [
      "too many positional",
      `prefix_rule(["a"], "allow", [], [], "why", "extra")\n`,
      "Found 1 extra positional parameter(s) for call to prefix_rule",
      1,
    ],
    ["load", `load("//other.star", "x")\n`, "No imports are available, you tried `//other.star`", 1],
    [
      "failing match example",
      `prefix_rule(\n    pattern = ["git", "status"],\n    match = ["git log"],\n)\n`,
      'unmatched examples: ["git log"]',
      1,
    ],
    [
      "failing not_match example",
      `\nprefix_rule(pattern = ["git"], not_match = ["git status"])\n`,
      'expected example to not match rule `PrefixRuleMatch { matched_prefix: ["git"]',
      2,
    ],
    [
      "example with bad shell syntax",
      `prefix_rule(pattern = ["git"], match = ["git 'x"])\n`,
      "invalid example: example string has invalid shell syntax",
      1,
    ],
    ["blank justification", `prefix_rule(pattern = ["ls"], justification = "  ")\n`, "invalid rule: justification cannot be empty", 1],
    [
      "host_executable relative path",
      `host_executable(name = "git", paths = ["bin/git"])\n`,
      "invalid rule: host_executable paths must be absolute (got bin/git)",
      1,
    ],
    [
      "network_rule wildcard",
      `network_rule(host = "*.example.com", protocol = "https", decision = "allow")\n`,
      "wildcards are not allowed",
      1,
    ],
    ["type error in an expression", `X = "a" + 1\n`, "Operation `+` not supported for types `string` and `int`", 1],
    ["invalid escape", `X = "\\q"\n`, "invalid escape sequence \\q", 1],
    ["reserved keyword", `import os\n`, "keyword 'import' is reserved", 1],
    ["return outside a function", `return 1\n`, "`return` outside of a function", 1],
    ["fail()", `fail("custom", "message")\n`, "fail: custom message", 1],
    ["runaway recursion", `def f():\n    return f()\nf()\n`, "Starlark call stack overflow", 2],
  ];
  for (const [name, text, message, line] of cases) {
    test(name, () => {
      const e = loadError(text);
      expect(e.code).toBe("RULES_PARSE");
      expect(e.message).toStartWith("failed to parse policy at /rules/f0.rules\n\nCaused by:\n");
      expect(e.message).toContain(message);
      expect(e.data.path).toBe("/rules/f0.rules");
      expect(e.data.line).toBe(line);
      expect(e.message).toContain(`/rules/f0.rules:${line}:`);
    });
  }

  test("an error in the second file names the second file", () => {
    const e = loadError(`prefix_rule(pattern = ["ls"])\n`, `prefix_rule(pattern = [])\n`);
    expect(e.data.path).toBe("/rules/f1.rules");
    expect(e.message).toContain("invalid pattern element: pattern cannot be empty");
  });
});
