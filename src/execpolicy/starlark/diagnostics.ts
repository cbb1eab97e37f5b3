/**
 * Diagnostics for rules files: source spans, the one error type of the Starlark front end and evaluator, and
 * the starlark-rust style rendering (`error: …` with a `-->` location line and a caret under the code), which
 * `execpolicy check` prints as Codex does (docs/execpolicy.md, "Errors").
 */

/**
 * Half-open range `[start, end)` in a file's source, in UTF-16 code units (JavaScript string indices, not bytes:
 * the two agree on ASCII text).
 */
export interface Span {
  start: number;
  end: number;
}

/** An error in a rules file: message plus where. Rendered by {@link renderDiagnostic}. */
export class StarlarkError extends Error {
  constructor(
    message: string,
    readonly span: Span | undefined,
    readonly file: SourceFile | undefined,
    /** Prefix Codex puts before Starlark-level errors (`starlark error: `); empty for policy errors. */
    readonly kind: "starlark" | "policy" = "starlark",
  ) {
    super(message);
    this.name = "StarlarkError";
  }
}

/** A rules file: its display path and text. */
export interface SourceFile {
  path: string;
  text: string;
}

/** 1-based line and column of a string offset (UTF-16 code units; the column counts code units too). */
export function lineCol(text: string, offset: number): { line: number; col: number } {
  let line = 1;
  let lineStart = 0;
  for (let i = 0; i < offset && i < text.length; i++) {
    if (text.charCodeAt(i) === 10) {
      line++;
      lineStart = i + 1;
    }
  }
  return { line, col: offset - lineStart + 1 };
}

/**
 * Diagnostic in the shape starlark-rust prints (`error: <msg>` / ` --> file:line:col` / source line with
 * carets). Multi-line spans show their first line.
 */
export function renderDiagnostic(message: string, file: SourceFile | undefined, span: Span | undefined): string {
  if (file === undefined || span === undefined) return `error: ${message}`;
  const { line, col } = lineCol(file.text, span.start);
  const lines = file.text.split("\n");
  const src = lines[line - 1] ?? "";
  const gutter = String(line).length;
  const pad = " ".repeat(gutter);
  const spanText = file.text.slice(span.start, span.end);
  const firstLineLen = spanText.includes("\n") ? src.length - (col - 1) : Math.max(1, spanText.length);
  return [
    `error: ${message}`,
    `${pad}--> ${file.path}:${line}:${col}`,
    `${pad} |`,
    `${line} | ${src}`,
    `${pad} | ${" ".repeat(col - 1)}${"^".repeat(Math.max(1, firstLineLen))}`,
    `${pad} |`,
  ].join("\n");
}
