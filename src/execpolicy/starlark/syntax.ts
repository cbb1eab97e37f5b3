/**
 * Lexer and parser for the Starlark subset that Codex `.rules` files use (execpolicy.md §1.1–1.2): the
 * "Extended" dialect of starlark-rust with f-strings — `def`/`lambda`, top-level `if`/`for`, comprehensions.
 *
 * Output: an AST whose every node carries a {@link Span} (byte offsets into the source) so that errors can
 * point at the code, as starlark-rust's diagnostics do. Parse failures throw {@link StarlarkError} with
 * messages in starlark-rust's wording (`Parse error: unexpected new line, expected expression`).
 */

/** Half-open byte range `[start, end)` in a file's source. */
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

/** 1-based line and column of a byte offset. */
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

// ---------------------------------------------------------------------------------------------------------
// Tokens

type TokKind = "name" | "int" | "float" | "string" | "fstring" | "op" | "newline" | "indent" | "dedent" | "eof";

interface Token {
  kind: TokKind;
  value: string; // identifier, operator, decoded string text, number text
  start: number;
  end: number;
  /** For f-strings: the raw body between the quotes (escapes decoded lazily per literal part). */
  raw?: string;
}

const KEYWORDS = new Set([
  "and", "break", "continue", "def", "elif", "else", "for", "if", "in", "lambda", "load", "not", "or", "pass", "return",
]);
// Python keywords that Starlark reserves: using them is a parse error.
const RESERVED = new Set(["as", "assert", "async", "await", "class", "del", "except", "finally", "from", "global", "import", "is", "nonlocal", "raise", "try", "while", "with", "yield"]);

const OPERATORS = [
  "**=", "//=", "<<=", ">>=", "...",
  "==", "!=", "<=", ">=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "//", "**", "->", "<<", ">>",
  "+", "-", "*", "/", "%", "<", ">", "=", "(", ")", "[", "]", "{", "}", ",", ":", ".", ";", "|", "&", "^", "~",
];

const OP3 = new Set(OPERATORS.filter((o) => o.length === 3));
const OP2 = new Set(OPERATORS.filter((o) => o.length === 2));
const OP1 = new Set(OPERATORS.filter((o) => o.length === 1));

function describe(t: Token): string {
  switch (t.kind) {
    case "newline":
      return "new line";
    case "indent":
      return "new indentation block";
    case "dedent":
      return "end of indentation block";
    case "eof":
      return "end of file";
    case "string":
    case "fstring":
      return "string literal";
    case "int":
    case "float":
      return "number literal";
    case "name":
      return KEYWORDS.has(t.value) ? `keyword '${t.value}'` : `identifier '${t.value}'`;
    case "op":
      return `'${t.value}'`;
  }
}

// Sticky regexes: matched in place at an offset (slicing the rest of the file per token is quadratic).
const STRING_PREFIX = /(?:[rR][bBfF]?|[bBfF][rR]?)?['"]/y;
const NUMBER = /0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?/y;
const IDENT = /[A-Za-z_][A-Za-z0-9_]*/y;
const isDigit = (c: string) => c >= "0" && c <= "9";
const isIdentStart = (c: string) => (c >= "a" && c <= "z") || (c >= "A" && c <= "Z") || c === "_";

/** Tokenise `file`, producing NEWLINE/INDENT/DEDENT like Python (no NEWLINE inside brackets). */
export function tokenize(file: SourceFile): Token[] {
  const s = file.text;
  const toks: Token[] = [];
  const indents = [0];
  let depth = 0;
  let i = 0;
  let atLineStart = true;
  const err = (msg: string, start: number, end = start + 1): never => {
    throw new StarlarkError(`Parse error: ${msg}`, { start, end }, file);
  };

  while (i <= s.length) {
    if (atLineStart && depth === 0) {
      // Measure indentation; skip blank and comment-only lines entirely.
      let j = i;
      let width = 0;
      while (j < s.length && (s[j] === " " || s[j] === "\t")) {
        width += s[j] === "\t" ? 8 - (width % 8) : 1;
        j++;
      }
      if (j >= s.length) {
        i = j;
        break;
      }
      if (s[j] === "\n" || s[j] === "#" || (s[j] === "\r" && s[j + 1] === "\n")) {
        while (j < s.length && s[j] !== "\n") j++;
        i = j + 1;
        continue;
      }
      if (s[j] === "\\" && s[j + 1] === "\n") {
        i = j + 2;
        continue;
      }
      const top = indents[indents.length - 1]!;
      if (width > top) {
        indents.push(width);
        toks.push({ kind: "indent", value: "", start: i, end: j });
      } else {
        while (width < indents[indents.length - 1]!) {
          indents.pop();
          toks.push({ kind: "dedent", value: "", start: j, end: j });
        }
        if (width !== indents[indents.length - 1]!) err("unindent does not match any outer indentation level", i, j);
      }
      i = j;
      atLineStart = false;
    }
    if (i >= s.length) break;
    const c = s[i]!;
    if (c === " " || c === "\t" || c === "\r") {
      i++;
      continue;
    }
    if (c === "#") {
      while (i < s.length && s[i] !== "\n") i++;
      continue;
    }
    if (c === "\\" && s[i + 1] === "\n") {
      i += 2;
      continue;
    }
    if (c === "\n") {
      if (depth === 0) {
        toks.push({ kind: "newline", value: "\n", start: i, end: i + 1 });
        atLineStart = true;
      }
      i++;
      continue;
    }
    // Strings, with optional prefixes r, b, f (and combinations rb/br, rf/fr).
    let pm: RegExpExecArray | null = null;
    if (c === "'" || c === '"' || "rRbBfF".includes(c)) {
      STRING_PREFIX.lastIndex = i;
      pm = STRING_PREFIX.exec(s);
    }
    if (pm !== null) {
      const prefix = pm[0].slice(0, -1).toLowerCase();
      const start = i;
      i += prefix.length;
      const q = s[i]!;
      const triple = s.startsWith(q.repeat(3), i);
      const delim = triple ? q.repeat(3) : q;
      i += delim.length;
      const bodyStart = i;
      for (;;) {
        if (i >= s.length) err(triple ? "unterminated triple-quoted string literal" : "unterminated string literal", start, s.length);
        if (s[i] === "\\") {
          i += 2;
          continue;
        }
        if (!triple && s[i] === "\n") err("unterminated string literal", start, i);
        if (s.startsWith(delim, i)) break;
        i++;
      }
      const body = s.slice(bodyStart, i);
      i += delim.length;
      const raw = prefix.includes("r");
      if (prefix.includes("f")) toks.push({ kind: "fstring", value: "", raw: body, start, end: i });
      else toks.push({ kind: "string", value: raw ? body : decodeEscapes(body, file, bodyStart), start, end: i });
      continue;
    }
    if (isDigit(c) || (c === "." && isDigit(s[i + 1] ?? ""))) {
      NUMBER.lastIndex = i;
      const m = NUMBER.exec(s)!;
      const text = m[0];
      const isFloat = /^[0-9.]/.test(text) && !/^0[xXoObB]/.test(text) && /[.eE]/.test(text);
      if (!isFloat && /^0[0-9]+$/.test(text)) err("invalid octal literal (use 0o prefix)", i, i + text.length);
      toks.push({ kind: isFloat ? "float" : "int", value: text, start: i, end: i + text.length });
      i += text.length;
      continue;
    }
    if (isIdentStart(c)) {
      IDENT.lastIndex = i;
      const m = IDENT.exec(s)!;
      if (RESERVED.has(m[0])) err(`keyword '${m[0]}' is reserved`, i, i + m[0].length);
      toks.push({ kind: "name", value: m[0], start: i, end: i + m[0].length });
      i += m[0].length;
      continue;
    }
    const op = OP3.has(s.slice(i, i + 3)) ? s.slice(i, i + 3) : OP2.has(s.slice(i, i + 2)) ? s.slice(i, i + 2) : OP1.has(c) ? c : undefined;
    if (op === undefined) err(`unexpected character ${JSON.stringify(c)}`, i);
    if (op === "(" || op === "[" || op === "{") depth++;
    if (op === ")" || op === "]" || op === "}") depth = Math.max(0, depth - 1);
    toks.push({ kind: "op", value: op!, start: i, end: i + op!.length });
    i += op!.length;
  }
  if (toks.length > 0 && toks[toks.length - 1]!.kind !== "newline") toks.push({ kind: "newline", value: "\n", start: s.length, end: s.length });
  while (indents.length > 1) {
    indents.pop();
    toks.push({ kind: "dedent", value: "", start: s.length, end: s.length });
  }
  toks.push({ kind: "eof", value: "", start: s.length, end: s.length });
  return toks;
}

/** Decode Starlark escape sequences in a non-raw string body. Unknown escapes are errors. */
export function decodeEscapes(body: string, file: SourceFile, offset: number): string {
  if (!body.includes("\\")) return body;
  let out = "";
  for (let i = 0; i < body.length; i++) {
    const c = body[i]!;
    if (c !== "\\") {
      out += c;
      continue;
    }
    const n = body[++i];
    switch (n) {
      case "\n":
        break; // line continuation inside a string
      case "n":
        out += "\n";
        break;
      case "t":
        out += "\t";
        break;
      case "r":
        out += "\r";
        break;
      case "a":
        out += "\x07";
        break;
      case "b":
        out += "\b";
        break;
      case "f":
        out += "\f";
        break;
      case "v":
        out += "\v";
        break;
      case "\\":
      case "'":
      case '"':
        out += n;
        break;
      case "x": {
        const h = body.slice(i + 1, i + 3);
        if (!/^[0-9a-fA-F]{2}$/.test(h)) throw new StarlarkError("Parse error: invalid \\x escape", { start: offset + i - 1, end: offset + i + 3 }, file);
        out += String.fromCharCode(parseInt(h, 16));
        i += 2;
        break;
      }
      case "u":
      case "U": {
        const len = n === "u" ? 4 : 8;
        const h = body.slice(i + 1, i + 1 + len);
        if (!new RegExp(`^[0-9a-fA-F]{${len}}$`).test(h)) throw new StarlarkError(`Parse error: invalid \\${n} escape`, { start: offset + i - 1, end: offset + i + 1 + len }, file);
        out += String.fromCodePoint(parseInt(h, 16));
        i += len;
        break;
      }
      default:
        if (n !== undefined && /[0-7]/.test(n)) {
          const m = /^[0-7]{1,3}/.exec(body.slice(i))![0];
          out += String.fromCharCode(parseInt(m, 8));
          i += m.length - 1;
          break;
        }
        throw new StarlarkError(`Parse error: invalid escape sequence \\${n ?? ""}`, { start: offset + i - 1, end: offset + i + 1 }, file);
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------
// AST

/** Expression nodes. */
export type Expr =
  | { t: "lit"; value: string | number | bigint | boolean | null; float?: boolean; span: Span }
  | { t: "fstr"; parts: (string | Expr)[]; span: Span }
  | { t: "name"; name: string; span: Span }
  | { t: "list"; items: Expr[]; span: Span }
  | { t: "tuple"; items: Expr[]; span: Span }
  | { t: "dict"; entries: [Expr, Expr][]; span: Span }
  | { t: "listcomp"; elt: Expr; clauses: CompClause[]; span: Span }
  | { t: "dictcomp"; key: Expr; value: Expr; clauses: CompClause[]; span: Span }
  | { t: "call"; fn: Expr; args: Arg[]; span: Span }
  | { t: "index"; obj: Expr; index: Expr; span: Span }
  | { t: "slice"; obj: Expr; lo?: Expr; hi?: Expr; step?: Expr; span: Span }
  | { t: "attr"; obj: Expr; name: string; span: Span }
  | { t: "unary"; op: string; operand: Expr; span: Span }
  | { t: "binary"; op: string; left: Expr; right: Expr; span: Span }
  | { t: "cond"; test: Expr; then: Expr; else: Expr; span: Span }
  | { t: "lambda"; params: Param[]; body: Expr; span: Span };

/** `for x in xs` / `if cond` clauses of a comprehension. */
export type CompClause = { t: "for"; target: Expr; iter: Expr } | { t: "if"; cond: Expr };

/** Call argument. */
export type Arg = { kind: "pos"; value: Expr } | { kind: "named"; name: string; value: Expr; span: Span } | { kind: "star"; value: Expr } | { kind: "starstar"; value: Expr };

/** Function parameter. */
export type Param = { kind: "normal"; name: string; default?: Expr } | { kind: "star"; name?: string } | { kind: "starstar"; name: string };

/** Statement nodes. */
export type Stmt =
  | { t: "expr"; expr: Expr; span: Span }
  | { t: "assign"; target: Expr; value: Expr; span: Span }
  | { t: "augassign"; op: string; target: Expr; value: Expr; span: Span }
  | { t: "def"; name: string; params: Param[]; body: Stmt[]; span: Span }
  | { t: "if"; test: Expr; body: Stmt[]; orelse: Stmt[]; span: Span }
  | { t: "for"; target: Expr; iter: Expr; body: Stmt[]; span: Span }
  | { t: "return"; value?: Expr; span: Span }
  | { t: "pass"; span: Span }
  | { t: "break"; span: Span }
  | { t: "continue"; span: Span }
  | { t: "load"; module: string; symbols: [string, string][]; span: Span };

// ---------------------------------------------------------------------------------------------------------
// Parser

/** Parse a whole rules file. */
export function parseFile(file: SourceFile): Stmt[] {
  return new Parser(file, tokenize(file)).file();
}

class Parser {
  private p = 0;

  constructor(
    private readonly src: SourceFile,
    private readonly toks: Token[],
  ) {}

  private get tok(): Token {
    return this.toks[this.p]!;
  }

  /** Kind of the current token (a method, so TypeScript does not narrow it across `this.p++`). */
  private k(): TokKind {
    return this.toks[this.p]!.kind;
  }

  private fail(expected: string, t: Token = this.tok): never {
    throw new StarlarkError(`Parse error: unexpected ${describe(t)}, expected ${expected}`, { start: t.start, end: Math.max(t.end, t.start + 1) }, this.src);
  }

  private isOp(v: string): boolean {
    return this.k() === "op" && this.tok.value === v;
  }

  private isKw(v: string): boolean {
    return this.k() === "name" && this.tok.value === v;
  }

  private eatOp(v: string): boolean {
    if (this.isOp(v)) {
      this.p++;
      return true;
    }
    return false;
  }

  private expectOp(v: string): Token {
    if (!this.isOp(v)) this.fail(`'${v}'`);
    return this.toks[this.p++]!;
  }

  private expectKw(v: string): Token {
    if (!this.isKw(v)) this.fail(`keyword '${v}'`);
    return this.toks[this.p++]!;
  }

  private ident(): Token {
    if (this.k() !== "name" || KEYWORDS.has(this.tok.value)) this.fail("identifier");
    return this.toks[this.p++]!;
  }

  file(): Stmt[] {
    const out: Stmt[] = [];
    while (this.k() !== "eof") {
      if (this.k() === "newline") {
        this.p++;
        continue;
      }
      if (this.k() === "indent") this.fail("expression");
      out.push(...this.statement());
    }
    return out;
  }

  private statement(): Stmt[] {
    const t = this.tok;
    if (t.kind === "name") {
      switch (t.value) {
        case "def":
          return [this.defStmt()];
        case "if":
          return [this.ifStmt()];
        case "for":
          return [this.forStmt()];
      }
    }
    const stmts = [this.simple()];
    while (this.eatOp(";")) {
      if (this.k() === "newline") break;
      stmts.push(this.simple());
    }
    if (this.k() !== "newline" && this.k() !== "eof") this.fail("new line");
    if (this.k() === "newline") this.p++;
    return stmts;
  }

  private simple(): Stmt {
    const t = this.tok;
    if (t.kind === "name") {
      switch (t.value) {
        case "return": {
          this.p++;
          const value = this.k() === "newline" || this.isOp(";") || this.k() === "eof" ? undefined : this.exprList();
          return { t: "return", value, span: { start: t.start, end: value?.span.end ?? t.end } };
        }
        case "pass":
        case "break":
        case "continue":
          this.p++;
          return { t: t.value, span: { start: t.start, end: t.end } } as Stmt;
        case "load":
          return this.loadStmt();
      }
    }
    const e = this.exprList();
    if (this.isOp("=")) {
      this.p++;
      this.checkTarget(e);
      const value = this.exprList();
      return { t: "assign", target: e, value, span: { start: e.span.start, end: value.span.end } };
    }
    for (const op of ["+=", "-=", "*=", "/=", "//=", "%=", "|=", "&=", "^=", "<<=", ">>="]) {
      if (this.isOp(op)) {
        this.p++;
        this.checkTarget(e);
        const value = this.exprList();
        return { t: "augassign", op: op.slice(0, -1), target: e, value, span: { start: e.span.start, end: value.span.end } };
      }
    }
    return { t: "expr", expr: e, span: e.span };
  }

  private checkTarget(e: Expr): void {
    if (e.t === "name" || e.t === "index" || e.t === "attr") return;
    if ((e.t === "tuple" || e.t === "list") && e.items.length > 0) return e.items.forEach((x) => this.checkTarget(x));
    throw new StarlarkError("Parse error: left-hand side of assignment is not assignable", e.span, this.src);
  }

  private loadStmt(): Stmt {
    const t = this.toks[this.p++]!;
    this.expectOp("(");
    if (this.k() !== "string") this.fail("string literal");
    const module = this.toks[this.p++]!.value;
    const symbols: [string, string][] = [];
    while (this.eatOp(",")) {
      if (this.isOp(")")) break;
      if (this.k() === "string") {
        const v = this.toks[this.p++]!.value;
        symbols.push([v, v]);
      } else {
        const local = this.ident().value;
        this.expectOp("=");
        if (this.k() !== "string") this.fail("string literal");
        symbols.push([local, this.toks[this.p++]!.value]);
      }
    }
    const end = this.expectOp(")");
    return { t: "load", module, symbols, span: { start: t.start, end: end.end } };
  }

  private block(): Stmt[] {
    this.expectOp(":");
    if (this.k() !== "newline") {
      // single-line suite: `if x: a; b`
      const stmts = [this.simple()];
      while (this.eatOp(";")) {
        if (this.k() === "newline") break;
        stmts.push(this.simple());
      }
      if (this.k() === "newline") this.p++;
      else if (this.k() !== "eof") this.fail("new line");
      return stmts;
    }
    this.p++;
    if (this.k() !== "indent") this.fail("new indentation block");
    this.p++;
    const body: Stmt[] = [];
    while (this.k() !== "dedent" && this.k() !== "eof") {
      if (this.k() === "newline") {
        this.p++;
        continue;
      }
      body.push(...this.statement());
    }
    if (this.k() === "dedent") this.p++;
    return body;
  }

  private defStmt(): Stmt {
    const t = this.toks[this.p++]!;
    const name = this.ident().value;
    this.expectOp("(");
    const params = this.params(")");
    this.expectOp(")");
    if (this.eatOp("->")) this.test();
    const body = this.block();
    return { t: "def", name, params, body, span: { start: t.start, end: this.toks[this.p - 1]!.end } };
  }

  private params(close: string): Param[] {
    const params: Param[] = [];
    while (!this.isOp(close)) {
      if (this.eatOp("**")) params.push({ kind: "starstar", name: this.ident().value });
      else if (this.eatOp("*")) params.push(this.k() === "name" ? { kind: "star", name: this.ident().value } : { kind: "star" });
      else {
        const name = this.ident().value;
        if (close === ")" && this.eatOp(":")) this.test(); // type annotation, ignored
        params.push({ kind: "normal", name, default: this.eatOp("=") ? this.test() : undefined });
      }
      if (!this.eatOp(",")) break;
    }
    return params;
  }

  private ifStmt(): Stmt {
    const t = this.toks[this.p++]!;
    const test = this.test();
    const body = this.block();
    let orelse: Stmt[] = [];
    if (this.isKw("elif")) orelse = [this.ifStmt()];
    else if (this.isKw("else")) {
      this.p++;
      orelse = this.block();
    }
    return { t: "if", test, body, orelse, span: { start: t.start, end: this.toks[this.p - 1]!.end } };
  }

  private forStmt(): Stmt {
    const t = this.toks[this.p++]!;
    const target = this.loopTarget();
    this.expectKw("in");
    const iter = this.exprList();
    const body = this.block();
    return { t: "for", target, iter, body, span: { start: t.start, end: this.toks[this.p - 1]!.end } };
  }

  private loopTarget(): Expr {
    const first = this.primary();
    if (!this.isOp(",")) {
      this.checkTarget(first);
      return first;
    }
    const items = [first];
    while (this.eatOp(",")) {
      if (this.isKw("in")) break;
      items.push(this.primary());
    }
    const e: Expr = { t: "tuple", items, span: { start: first.span.start, end: items[items.length - 1]!.span.end } };
    this.checkTarget(e);
    return e;
  }

  /** `test {, test} [,]` → a tuple when there is a comma. */
  private exprList(): Expr {
    const first = this.test();
    if (!this.isOp(",")) return first;
    const items = [first];
    while (this.eatOp(",")) {
      if (this.k() === "newline" || this.k() === "eof" || this.isOp("=") || this.isOp(")") || this.isOp(";")) break;
      items.push(this.test());
    }
    return { t: "tuple", items, span: { start: first.span.start, end: items[items.length - 1]!.span.end } };
  }

  private test(): Expr {
    if (this.isKw("lambda")) {
      const t = this.toks[this.p++]!;
      const params = this.params(":");
      this.expectOp(":");
      const body = this.test();
      return { t: "lambda", params, body, span: { start: t.start, end: body.span.end } };
    }
    const e = this.orExpr();
    if (this.isKw("if")) {
      this.p++;
      const test = this.orExpr();
      this.expectKw("else");
      const other = this.test();
      return { t: "cond", test, then: e, else: other, span: { start: e.span.start, end: other.span.end } };
    }
    return e;
  }

  private orExpr(): Expr {
    let e = this.andExpr();
    while (this.isKw("or")) {
      this.p++;
      const r = this.andExpr();
      e = { t: "binary", op: "or", left: e, right: r, span: { start: e.span.start, end: r.span.end } };
    }
    return e;
  }

  private andExpr(): Expr {
    let e = this.notExpr();
    while (this.isKw("and")) {
      this.p++;
      const r = this.notExpr();
      e = { t: "binary", op: "and", left: e, right: r, span: { start: e.span.start, end: r.span.end } };
    }
    return e;
  }

  private notExpr(): Expr {
    if (this.isKw("not")) {
      const t = this.toks[this.p++]!;
      const operand = this.notExpr();
      return { t: "unary", op: "not", operand, span: { start: t.start, end: operand.span.end } };
    }
    return this.comparison();
  }

  private comparison(): Expr {
    let e = this.bitOr();
    for (;;) {
      let op: string | undefined;
      if (this.k() === "op" && ["==", "!=", "<", ">", "<=", ">="].includes(this.tok.value)) op = this.toks[this.p++]!.value;
      else if (this.isKw("in")) {
        this.p++;
        op = "in";
      } else if (this.isKw("not") && this.toks[this.p + 1]?.kind === "name" && this.toks[this.p + 1]!.value === "in") {
        this.p += 2;
        op = "not in";
      }
      if (op === undefined) return e;
      const r = this.bitOr();
      e = { t: "binary", op, left: e, right: r, span: { start: e.span.start, end: r.span.end } };
    }
  }

  private binLevel(ops: string[], next: () => Expr): Expr {
    let e = next();
    while (this.k() === "op" && ops.includes(this.tok.value)) {
      const op = this.toks[this.p++]!.value;
      const r = next();
      e = { t: "binary", op, left: e, right: r, span: { start: e.span.start, end: r.span.end } };
    }
    return e;
  }

  private bitOr = (): Expr => this.binLevel(["|"], this.bitXor);
  private bitXor = (): Expr => this.binLevel(["^"], this.bitAnd);
  private bitAnd = (): Expr => this.binLevel(["&"], this.shift);
  private shift = (): Expr => this.binLevel(["<<", ">>"], this.arith);
  private arith = (): Expr => this.binLevel(["+", "-"], this.term);
  private term = (): Expr => this.binLevel(["*", "/", "//", "%"], this.unary);

  private unary = (): Expr => {
    if (this.k() === "op" && ["-", "+", "~"].includes(this.tok.value)) {
      const t = this.toks[this.p++]!;
      const operand = this.unary();
      return { t: "unary", op: t.value, operand, span: { start: t.start, end: operand.span.end } };
    }
    return this.primary();
  };

  private primary(): Expr {
    let e = this.atom();
    for (;;) {
      if (this.isOp("(")) {
        this.p++;
        const args = this.callArgs();
        const end = this.expectOp(")");
        e = { t: "call", fn: e, args, span: { start: e.span.start, end: end.end } };
      } else if (this.isOp("[")) {
        this.p++;
        e = this.subscript(e);
      } else if (this.isOp(".")) {
        this.p++;
        const n = this.ident();
        e = { t: "attr", obj: e, name: n.value, span: { start: e.span.start, end: n.end } };
      } else return e;
    }
  }

  private subscript(obj: Expr): Expr {
    let lo: Expr | undefined;
    if (!this.isOp(":")) {
      lo = this.test();
      if (this.isOp("]")) {
        const end = this.expectOp("]");
        return { t: "index", obj, index: lo, span: { start: obj.span.start, end: end.end } };
      }
    }
    this.expectOp(":");
    const hi = this.isOp(":") || this.isOp("]") ? undefined : this.test();
    let step: Expr | undefined;
    if (this.eatOp(":")) step = this.isOp("]") ? undefined : this.test();
    const end = this.expectOp("]");
    return { t: "slice", obj, lo, hi, step, span: { start: obj.span.start, end: end.end } };
  }

  private callArgs(): Arg[] {
    const args: Arg[] = [];
    while (!this.isOp(")")) {
      if (this.eatOp("**")) args.push({ kind: "starstar", value: this.test() });
      else if (this.eatOp("*")) args.push({ kind: "star", value: this.test() });
      else if (this.k() === "name" && !KEYWORDS.has(this.tok.value) && this.toks[this.p + 1]?.kind === "op" && this.toks[this.p + 1]!.value === "=") {
        const n = this.toks[this.p]!;
        this.p += 2;
        const value = this.test();
        args.push({ kind: "named", name: n.value, value, span: { start: n.start, end: value.span.end } });
      } else {
        const value = this.test();
        if (args.some((a) => a.kind !== "pos")) {
          throw new StarlarkError("Parse error: positional argument after named argument", value.span, this.src);
        }
        args.push({ kind: "pos", value });
      }
      if (!this.eatOp(",")) break;
    }
    return args;
  }

  private atom(): Expr {
    const t = this.tok;
    const span = { start: t.start, end: t.end };
    switch (t.kind) {
      case "int":
        this.p++;
        return { t: "lit", value: parseIntLiteral(t.value), span };
      case "float":
        this.p++;
        return { t: "lit", value: Number(t.value), float: true, span };
      case "string": {
        // Adjacent string literals are not concatenated in Starlark.
        this.p++;
        return { t: "lit", value: t.value, span };
      }
      case "fstring":
        this.p++;
        return { t: "fstr", parts: this.fstringParts(t), span };
      case "name":
        if (t.value === "True" || t.value === "False" || t.value === "None") {
          this.p++;
          return { t: "lit", value: t.value === "None" ? null : t.value === "True", span };
        }
        if (KEYWORDS.has(t.value)) this.fail("expression");
        this.p++;
        return { t: "name", name: t.value, span };
      case "op":
        if (t.value === "(") return this.parenExpr();
        if (t.value === "[") return this.listExpr();
        if (t.value === "{") return this.dictExpr();
        return this.fail("expression");
      default:
        return this.fail("expression");
    }
  }

  private parenExpr(): Expr {
    const open = this.toks[this.p++]!;
    if (this.isOp(")")) {
      const end = this.toks[this.p++]!;
      return { t: "tuple", items: [], span: { start: open.start, end: end.end } };
    }
    const first = this.test();
    if (this.isOp(")")) {
      this.p++;
      return first;
    }
    const items = [first];
    while (this.eatOp(",")) {
      if (this.isOp(")")) break;
      items.push(this.test());
    }
    const end = this.expectOp(")");
    return { t: "tuple", items, span: { start: open.start, end: end.end } };
  }

  private compClauses(close: string): CompClause[] {
    const clauses: CompClause[] = [];
    while (!this.isOp(close)) {
      if (this.isKw("for")) {
        this.p++;
        const target = this.loopTarget();
        this.expectKw("in");
        clauses.push({ t: "for", target, iter: this.orExpr() });
      } else if (this.isKw("if")) {
        this.p++;
        clauses.push({ t: "if", cond: this.orExpr() });
      } else this.fail(`'${close}'`);
    }
    return clauses;
  }

  private listExpr(): Expr {
    const open = this.toks[this.p++]!;
    const items: Expr[] = [];
    if (!this.isOp("]")) {
      const first = this.test();
      if (this.isKw("for")) {
        const clauses = this.compClauses("]");
        const end = this.expectOp("]");
        return { t: "listcomp", elt: first, clauses, span: { start: open.start, end: end.end } };
      }
      items.push(first);
      while (this.eatOp(",")) {
        if (this.isOp("]")) break;
        items.push(this.test());
      }
    }
    const end = this.expectOp("]");
    return { t: "list", items, span: { start: open.start, end: end.end } };
  }

  private dictExpr(): Expr {
    const open = this.toks[this.p++]!;
    const entries: [Expr, Expr][] = [];
    if (!this.isOp("}")) {
      const k = this.test();
      this.expectOp(":");
      const v = this.test();
      if (this.isKw("for")) {
        const clauses = this.compClauses("}");
        const end = this.expectOp("}");
        return { t: "dictcomp", key: k, value: v, clauses, span: { start: open.start, end: end.end } };
      }
      entries.push([k, v]);
      while (this.eatOp(",")) {
        if (this.isOp("}")) break;
        const k2 = this.test();
        this.expectOp(":");
        entries.push([k2, this.test()]);
      }
    }
    const end = this.expectOp("}");
    return { t: "dict", entries, span: { start: open.start, end: end.end } };
  }

  /** Split an f-string body into literal text and `{expr}` parts (`{{`/`}}` are braces). */
  private fstringParts(t: Token): (string | Expr)[] {
    const body = t.raw!;
    const bodyOffset = this.src.text.indexOf(body, t.start);
    const parts: (string | Expr)[] = [];
    let lit = "";
    for (let i = 0; i < body.length; i++) {
      const c = body[i]!;
      if (c === "{" && body[i + 1] === "{") {
        lit += "{";
        i++;
      } else if (c === "}" && body[i + 1] === "}") {
        lit += "}";
        i++;
      } else if (c === "{") {
        const close = body.indexOf("}", i);
        if (close < 0) throw new StarlarkError("Parse error: unterminated '{' in f-string", t, this.src);
        if (lit !== "") parts.push(decodeEscapes(lit, this.src, bodyOffset));
        lit = "";
        const inner: SourceFile = { path: this.src.path, text: body.slice(i + 1, close) };
        const toks = tokenize(inner).filter((x) => x.kind !== "newline");
        const sub = new Parser(inner, toks);
        const e = sub.test();
        parts.push(e);
        i = close;
      } else if (c === "}") {
        throw new StarlarkError("Parse error: single '}' is not allowed in f-string", t, this.src);
      } else lit += c;
    }
    if (lit !== "") parts.push(decodeEscapes(lit, this.src, bodyOffset));
    return parts;
  }
}

function parseIntLiteral(text: string): number | bigint {
  const v = BigInt(text.replace(/^0[oO]/, "0o"));
  return v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v;
}
