/**
 * Sizes (issue 42, "Split by concern"): no file in `src/` over {@link MAX_FILE_LINES} lines and no function over
 * {@link MAX_FUNCTION_LINES} lines, so that each file holds one idea and each function one step. A function is a
 * function declaration, a method (constructors and accessors included), or a function or arrow function assigned to a
 * `const`; its lines run from its declaration (the line of `function`, the method's name, or `const`; its docstring
 * not counted) to its closing brace. Found with the TypeScript compiler API, so a brace in a string or a comment
 * does not count.
 *
 * Two lists stand outside the bounds, each entry named (`file` or `file:function`, `Class.method` for a method):
 * - {@link TABLES}: what is long because it is a table (a lexer's or a filter's cases, one per row), each with the
 *   reason. It stays.
 * - {@link WAITING}: files and functions still waiting for their split (issue 42). It can only shrink: an entry that
 *   is now within bounds fails the test, which asks for it to be removed, so a split that lands is kept.
 *
 * Pure: parses the source files, runs nothing.
 */
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import ts from "typescript";

const ROOT = join(import.meta.dir, "..", "..");
/** Most lines a file of `src/` may have. */
const MAX_FILE_LINES = 600;
/** Most lines a function may span, declaration to closing brace. */
const MAX_FUNCTION_LINES = 100;

/** Long because they are tables (one case per row), with the reason: they stay. */
const TABLES: Readonly<Record<string, string>> = {
  "src/sandbox/linux/seccomp.ts:buildFilter": "the BPF filter: one instruction or rule per line, in the kernel's order",
  "src/execpolicy/starlark/lexer.ts:tokenize": "the Starlark lexer: one case per token kind",
  "src/execpolicy/starlark/builtins.ts:standardGlobals": "the Starlark builtins: one entry per builtin function",
  "src/execpolicy/starlark/builtins.ts:attribute": "the Starlark builtins: one case per method of a string, list or dict",
};

/** Still waiting for their split (issue 42): may only shrink. */
const WAITING: readonly string[] = [];

/** Repository-relative paths of the `.ts` files under `dir`. */
function sources(dir: string): string[] {
  return readdirSync(join(ROOT, dir)).flatMap((n) => {
    const p = join(dir, n);
    if (statSync(join(ROOT, p)).isDirectory()) return sources(p);
    return p.endsWith(".ts") ? [p] : [];
  });
}

/** One function's name (`name`, `Class.method`) and its line count, declaration to closing brace. */
interface Measured {
  name: string;
  lines: number;
}

/** The functions of `file` (named as {@link Measured} says) and their line counts. */
function functionsOf(file: string, text: string): Measured[] {
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const out: Measured[] = [];
  const lines = (from: ts.Node, to: ts.Node) =>
    sf.getLineAndCharacterOfPosition(to.getEnd()).line - sf.getLineAndCharacterOfPosition(from.getStart(sf)).line + 1;
  const owner = (n: ts.Node): string | undefined => {
    const c = n.parent;
    return (ts.isClassDeclaration(c) || ts.isClassExpression(c)) && c.name !== undefined ? c.name.text : undefined;
  };
  const visit = (n: ts.Node) => {
    if (ts.isFunctionDeclaration(n) && n.body !== undefined) {
      out.push({ name: n.name?.text ?? "default", lines: lines(n, n) });
    } else if (
      (ts.isMethodDeclaration(n) || ts.isConstructorDeclaration(n) || ts.isGetAccessor(n) || ts.isSetAccessor(n)) &&
      n.body !== undefined
    ) {
      const name = ts.isConstructorDeclaration(n) ? "constructor" : n.name.getText(sf);
      const cls = owner(n);
      out.push({ name: cls === undefined ? name : `${cls}.${name}`, lines: lines(n, n) });
    } else if (
      ts.isVariableDeclaration(n) &&
      ts.isIdentifier(n.name) &&
      n.initializer !== undefined &&
      (ts.isArrowFunction(n.initializer) || ts.isFunctionExpression(n.initializer)) &&
      (ts.getCombinedNodeFlags(n) & ts.NodeFlags.Const) !== 0
    ) {
      // From `const` (the statement's start, when the declaration has one of its own) to the body's end.
      const list = n.parent;
      const from = ts.isVariableDeclarationList(list) && ts.isVariableStatement(list.parent) ? list.parent : n;
      out.push({ name: n.name.text, lines: lines(from, n.initializer) });
    }
    ts.forEachChild(n, visit);
  };
  visit(sf);
  return out;
}

/** Every file and function of `src/` over its bound, named as the lists name them, with its line count. */
function oversized(): Map<string, number> {
  const over = new Map<string, number>();
  for (const file of sources("src")) {
    const text = readFileSync(join(ROOT, file), "utf8");
    const count = text.split("\n").length - (text.endsWith("\n") ? 1 : 0);
    if (count > MAX_FILE_LINES) over.set(file, count);
    for (const f of functionsOf(file, text)) if (f.lines > MAX_FUNCTION_LINES) over.set(`${file}:${f.name}`, f.lines);
  }
  return over;
}

describe("sizes", () => {
  const over = oversized();

  test(`no file in src/ over ${MAX_FILE_LINES} lines and no function over ${MAX_FUNCTION_LINES}, except the listed`, () => {
    const unlisted = [...over]
      .filter(([name]) => TABLES[name] === undefined && !WAITING.includes(name))
      .map(([n, c]) => `${n} (${c} lines)`);
    expect(unlisted).toEqual([]);
  });

  test("every waiting entry is still over its bound (remove those that are not: the split landed)", () => {
    const within = WAITING.filter((name) => !over.has(name)).map((n) => `${n}: within bounds now, remove it from WAITING`);
    expect(within).toEqual([]);
  });

  test("every table entry is still over its bound and gives a reason", () => {
    const stale = Object.entries(TABLES)
      .filter(([name, reason]) => !over.has(name) || reason.trim() === "")
      .map(([n]) => `${n}: within bounds now (or no reason), remove it from TABLES`);
    expect(stale).toEqual([]);
  });

  test("the measure counts what it should", () => {
    const text = [
      "/** doc */",
      "export function a(): void {",
      '  const s = "}";',
      "}",
      "class K {",
      "  m(): void {",
      "    return;",
      "  }",
      "}",
      "const f = () => {",
      "  void 0;",
      "};",
      "let g = () => 1;",
    ].join("\n");
    expect(functionsOf("x.ts", text)).toEqual([
      { name: "a", lines: 3 },
      { name: "K.m", lines: 3 },
      { name: "f", lines: 3 },
    ]);
  });
});
