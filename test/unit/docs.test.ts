/**
 * The docs hold (issue 33): every `docs/…` citation in the code (src/, test/, scripts/, ffi/, build.ts) and in
 * README.md and docs/ names a file that exists, and where it names a section (`docs/escalation.md, "Wire
 * protocol"`), a heading of that file; every repository path README.md, docs/ and the code (src/, test/, scripts/,
 * bench/) name (`src/…`, `test/…`, `docs/…`, `patches/…`, `scripts/…`, `bench/…`) exists (issue 42); every relative Markdown link in README.md and docs/ resolves, anchors
 * included; every Markdown table there parses (the same number of cells in every row, a `|` inside a cell
 * escaped as `\|`). Pure: reads files, runs nothing.
 */
import { describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, normalize } from "node:path";

const ROOT = join(import.meta.dir, "..", "..");

/** Repository-relative paths of the files under `dir` whose names end with one of `exts`. */
function filesUnder(dir: string, exts: readonly string[]): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const name of readdirSync(join(ROOT, d))) {
      const p = join(d, name);
      if (statSync(join(ROOT, p)).isDirectory()) {
        if (name !== "node_modules" && name !== "fixtures") walk(p);
      } else if (exts.some((e) => p.endsWith(e))) out.push(p);
    }
  };
  walk(dir);
  return out;
}

/** The Markdown files the test reads: README.md and docs/. */
const MARKDOWN = ["README.md", ...filesUnder("docs", [".md"])];
/** The code and scripts whose comments cite docs. */
const CODE = [
  ...filesUnder("src", [".ts"]),
  ...filesUnder("test", [".ts"]),
  ...filesUnder("scripts", [".ts", ".sh", ".cjs"]),
  ...filesUnder("ffi", [".ts"]),
  "build.ts",
  ".ci/run",
].filter((f) => f !== "test/unit/docs.test.ts"); // this file plants citations of missing docs on purpose

/** GitHub's anchor of a heading: lower case, punctuation dropped (`-` and `_` kept), spaces to hyphens. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, "")
    .replace(/\s/g, "-");
}

/** The headings of Markdown `text` (outside fenced code), as written (`## `Foo` bar` → "`Foo` bar"). */
function headingsOf(text: string): string[] {
  const out: string[] = [];
  let fenced = false;
  for (const line of text.split("\n")) {
    if (/^\s*(```|~~~)/.test(line)) fenced = !fenced;
    else if (!fenced && /^#{1,6} /.test(line)) out.push(line.replace(/^#{1,6} /, "").trim());
  }
  return out;
}

/** The anchors of Markdown `text`, GitHub's way (a repeated heading gets `-1`, `-2`, …). */
function anchorsOf(text: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const h of headingsOf(text)) {
    const s = slug(h);
    const n = seen.get(s) ?? 0;
    out.add(n === 0 ? s : `${s}-${n}`);
    seen.set(s, n + 1);
  }
  return out;
}

/**
 * A cited section title matches a heading when it is the heading, or the heading's start followed by a word
 * boundary (`"Bubblewrap"` names "Bubblewrap: the bridge (…)"). Backticks and case do not count.
 */
function hasSection(text: string, title: string): boolean {
  const plain = (s: string) => s.replace(/`/g, "").toLowerCase();
  const t = plain(title);
  return headingsOf(text).some((h) => plain(h) === t || (plain(h).startsWith(t) && /^[^\p{L}\p{N}]/u.test(plain(h).slice(t.length))));
}

/** One `docs/…` citation: the file (repository-relative), the section title when one is quoted, where it was. */
interface Citation {
  file: string;
  section?: string;
  where: string;
}

/**
 * The citations in `text` (of file `where`): `docs/x.md`, `docs/x.md, "Section"`, `docs/x.md "Section"`, and a
 * README section by name (`README "Section"`).
 */
function citationsIn(text: string, where: string): Citation[] {
  const out: Citation[] = [];
  for (const m of text.matchAll(/(?<![\w./-])docs\/([\w./-]*[\w/])(?:,? "([^"\n]+)")?/g)) {
    const file = `docs/${m[1]!}`;
    if (file.includes("*")) continue;
    out.push({ file, section: m[1]!.endsWith(".md") ? m[2] : undefined, where });
  }
  // A section of the README cited by name (`README "Install"`, `README.md, "Install"`) must be one of its headings.
  for (const m of text.matchAll(/(?<![\w./-])README(?:\.md)?,? "([^"\n]+)"/g)) out.push({ file: "README.md", section: m[1]!, where });
  return out;
}

/** Problems with `citation`: its file is missing, or its section is no heading of it. */
function citationProblem(c: Citation): string | undefined {
  const path = join(ROOT, c.file);
  if (!existsSync(path)) return `${c.where}: cites ${c.file}, which does not exist`;
  if (c.section !== undefined && !hasSection(readFileSync(path, "utf8"), c.section)) {
    return `${c.where}: cites ${c.file}, "${c.section}", which is no heading of it`;
  }
  return undefined;
}

/** The top folders whose paths {@link pathsIn} finds: a path starting with one of them names a repository file. */
const PATH_ROOTS = ["src", "test", "docs", "patches", "scripts", "bench"];

/**
 * The repository paths `text` names (`src/sandbox/backend.ts`, `test/unit/`, `scripts/test.sh`), each with its
 * 1-based line. A glob or a placeholder (`src/**\/*.ts`, `shells/<arch>/`, `{a,b}`) is no path and is skipped; so is
 * a path inside a longer one (`dist/src/x`) or a URL (`github.com/o/r/src/x`).
 */
function pathsIn(text: string): { path: string; line: number }[] {
  const out: { path: string; line: number }[] = [];
  const re = new RegExp(`(?<![\\w./@:~-])((?:${PATH_ROOTS.join("|")})/[\\w./*{}<>,-]*[\\w/*}>])`, "g");
  text.split("\n").forEach((l, i) => {
    for (const m of l.matchAll(re)) {
      const path = m[1]!;
      if (/[*{}<>]/.test(path)) continue;
      out.push({ path, line: i + 1 });
    }
  });
  return out;
}

/** Problems with the repository paths file `file` (text `text`) names: each path that `exists` says is missing. */
function pathProblems(file: string, text: string, exists: (path: string) => boolean): string[] {
  return pathsIn(text)
    .filter((p) => !exists(p.path))
    .map((p) => `${file}:${p.line}: names ${p.path}, which does not exist`);
}

/** Problems with the relative links of Markdown file `file` (text `text`): missing targets or anchors. */
function linkProblems(file: string, text: string, read: (path: string) => string | undefined): string[] {
  const out: string[] = [];
  const code = text.replace(/```[\s\S]*?```/g, "").replace(/`[^`\n]*`/g, "``");
  for (const m of code.matchAll(/\]\(([^)\s]+)\)/g)) {
    const target = m[1]!;
    if (/^[a-z]+:/.test(target)) continue; // https:, mailto:
    const [path, anchor] = target.split("#") as [string, string | undefined];
    const resolved = path === "" ? file : normalize(join(dirname(file), path));
    const content = read(resolved);
    if (content === undefined) {
      out.push(`${file}: links to ${target}, but ${resolved} does not exist`);
      continue;
    }
    if (anchor !== undefined && resolved.endsWith(".md") && !anchorsOf(content).has(anchor)) {
      out.push(`${file}: links to ${target}, but ${resolved} has no heading with anchor #${anchor}`);
    }
  }
  return out;
}

/** The cells of Markdown table row `line` (`\|` inside a cell does not split it). */
function cellsOf(line: string): string[] {
  const inner = line.trim().replace(/^\|/, "").replace(/\|$/, "");
  return inner.split(/(?<!\\)\|/).map((c) => c.trim());
}

/** Problems with the tables of Markdown `text` (of file `file`): rows whose cell count differs from the header's. */
function tableProblems(file: string, text: string): string[] {
  const out: string[] = [];
  const lines = text.split("\n");
  let fenced = false;
  for (let i = 0; i < lines.length; i++) {
    if (/^\s*(```|~~~)/.test(lines[i]!)) fenced = !fenced;
    if (fenced) continue;
    const isRow = (l: string | undefined) => l !== undefined && /^\s*\|.*\|\s*$/.test(l);
    const isRule = (l: string | undefined) => l !== undefined && /^\s*\|(\s*:?-{3,}:?\s*\|)+\s*$/.test(l);
    if (!(isRow(lines[i]) && isRule(lines[i + 1]) && !isRow(lines[i - 1]))) continue;
    const width = cellsOf(lines[i]!).length;
    for (let j = i + 1; isRow(lines[j]); j++) {
      const n = cellsOf(lines[j]!).length;
      if (n !== width)
        out.push(`${file}:${j + 1}: a table row with ${n} cells under a header of ${width} (escape a | inside a cell as \\|)`);
    }
  }
  return out;
}

const readRepo = (p: string): string | undefined => {
  const abs = join(ROOT, p);
  if (!existsSync(abs)) return undefined;
  return statSync(abs).isDirectory() ? "" : readFileSync(abs, "utf8");
};

describe("docs", () => {
  test("every docs/… citation in the code, README.md and docs/ resolves, to a heading when a section is named", () => {
    const cites = [...CODE, ...MARKDOWN]
      .filter((f) => existsSync(join(ROOT, f)))
      .flatMap((f) => citationsIn(readFileSync(join(ROOT, f), "utf8"), f));
    expect(cites.length).toBeGreaterThan(50);
    expect(cites.map(citationProblem).filter((p) => p !== undefined)).toEqual([]);
  });

  test("every repository path named in README.md, docs/ and the code (src/, test/, scripts/, bench/) exists", () => {
    // The layering test plants imports of files that do not exist, on purpose (as this file does).
    const files = [...MARKDOWN, ...CODE, ...filesUnder("bench", [".ts"])].filter(
      (f) => f !== "test/unit/layering.test.ts" && existsSync(join(ROOT, f)),
    );
    const named = files.flatMap((f) => pathsIn(readFileSync(join(ROOT, f), "utf8")));
    expect(named.length).toBeGreaterThan(200);
    const exists = (p: string) => existsSync(join(ROOT, p));
    expect(files.flatMap((f) => pathProblems(f, readFileSync(join(ROOT, f), "utf8"), exists))).toEqual([]);
  });

  test("every relative link in README.md and docs/ resolves, anchors included", () => {
    expect(MARKDOWN.flatMap((f) => linkProblems(f, readFileSync(join(ROOT, f), "utf8"), readRepo))).toEqual([]);
  });

  test("every Markdown table in README.md and docs/ has the same number of cells in every row", () => {
    expect(MARKDOWN.flatMap((f) => tableProblems(f, readFileSync(join(ROOT, f), "utf8")))).toEqual([]);
  });

  test("the README stays a page a newcomer reads (at most ~300 lines)", () => {
    expect(readFileSync(join(ROOT, "README.md"), "utf8").split("\n").length).toBeLessThanOrEqual(320);
  });

  test("the checks catch planted problems", () => {
    const md = "# T\n\n## Wire protocol\n\n| a | b |\n| - | - |\n| `x|y` | z |\n| `x\\|y` | z |\n";
    expect(tableProblems("p.md", md.replace("| - | - |", "| --- | --- |"))).toEqual([
      "p.md:7: a table row with 3 cells under a header of 2 (escape a | inside a cell as \\|)",
    ]);
    expect(citationsIn('see docs/escalation.md, "Wire protocol" and docs/nope.md.', "x.ts")).toEqual([
      { file: "docs/escalation.md", section: "Wire protocol", where: "x.ts" },
      { file: "docs/nope.md", section: undefined, where: "x.ts" },
    ]);
    expect(citationsIn('see README "shellmcp exec-server"', "y.ts")).toEqual([
      { file: "README.md", section: "shellmcp exec-server", where: "y.ts" },
    ]);
    expect(citationProblem({ file: "README.md", section: "shellmcp exec-server", where: "y.ts" })).toContain("no heading");
    expect(citationProblem({ file: "docs/nope.md", where: "x.ts" })).toContain("does not exist");
    expect(citationProblem({ file: "docs/escalation.md", section: "No such section", where: "x.ts" })).toContain("no heading");
    expect(citationProblem({ file: "docs/escalation.md", section: "Wire protocol", where: "x.ts" })).toBeUndefined();
    const read = (p: string) => (p === "docs/a.md" ? md : undefined);
    expect(linkProblems("docs/b.md", "[x](a.md#wire-protocol) [y](a.md#nope) [z](c.md)", read)).toEqual([
      "docs/b.md: links to a.md#nope, but docs/a.md has no heading with anchor #nope",
      "docs/b.md: links to c.md, but docs/c.md does not exist",
    ]);
    expect(slug("`shellmcp serve`: the MCP server")).toBe("shellmcp-serve-the-mcp-server");
    const named =
      "see `test/h4/secret-env.test.ts`, src/sandbox/backend.ts: and (src/escalate/worker.ts).\n" +
      "not paths: src/**/*.ts, dist/shells/<arch>/, https://example.org/src/x.ts, node_modules/x/src/y.ts, ~/src/z\n";
    expect(pathsIn(named)).toEqual([
      { path: "test/h4/secret-env.test.ts", line: 1 },
      { path: "src/sandbox/backend.ts", line: 1 },
      { path: "src/escalate/worker.ts", line: 1 },
    ]);
    expect(pathProblems("d.md", named, (p) => p === "src/sandbox/backend.ts")).toEqual([
      "d.md:1: names test/h4/secret-env.test.ts, which does not exist",
      "d.md:1: names src/escalate/worker.ts, which does not exist",
    ]);
  });
});
