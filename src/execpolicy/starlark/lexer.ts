/**
 * Lexer for the Starlark subset of Codex `.rules` files (docs/execpolicy.md, "The language"): Python-style
 * tokens with NEWLINE/INDENT/DEDENT (none inside brackets), string and f-string literals with Starlark's escape
 * rules, and parse errors in starlark-rust's wording. Offsets are indices into the source string.
 */
import { StarlarkError, type SourceFile } from "./diagnostics.ts";

/** Token kinds; NEWLINE/INDENT/DEDENT as in Python. */
export type TokKind = "name" | "int" | "float" | "string" | "fstring" | "op" | "newline" | "indent" | "dedent" | "eof";

/** One token: its kind, its text (decoded for strings) and its span (string offsets). */
export interface Token {
  kind: TokKind;
  value: string; // identifier, operator, decoded string text, number text
  start: number;
  end: number;
  /** For f-strings: the raw body between the quotes (escapes decoded lazily per literal part). */
  raw?: string;
}

/** Starlark keywords (not usable as identifiers). */
export const KEYWORDS = new Set([
  "and",
  "break",
  "continue",
  "def",
  "elif",
  "else",
  "for",
  "if",
  "in",
  "lambda",
  "load",
  "not",
  "or",
  "pass",
  "return",
]);
// Python keywords that Starlark reserves: using them is a parse error.
const RESERVED = new Set([
  "as",
  "assert",
  "async",
  "await",
  "class",
  "del",
  "except",
  "finally",
  "from",
  "global",
  "import",
  "is",
  "nonlocal",
  "raise",
  "try",
  "while",
  "with",
  "yield",
]);

const OPERATORS = [
  "**=",
  "//=",
  "<<=",
  ">>=",
  "...",
  "==",
  "!=",
  "<=",
  ">=",
  "+=",
  "-=",
  "*=",
  "/=",
  "%=",
  "&=",
  "|=",
  "^=",
  "//",
  "**",
  "->",
  "<<",
  ">>",
  "+",
  "-",
  "*",
  "/",
  "%",
  "<",
  ">",
  "=",
  "(",
  ")",
  "[",
  "]",
  "{",
  "}",
  ",",
  ":",
  ".",
  ";",
  "|",
  "&",
  "^",
  "~",
];

const OP3 = new Set(OPERATORS.filter((o) => o.length === 3));
const OP2 = new Set(OPERATORS.filter((o) => o.length === 2));
const OP1 = new Set(OPERATORS.filter((o) => o.length === 1));

/** How starlark-rust names a token in `unexpected …` parse errors. */
export function describeToken(t: Token): string {
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
  if (toks.length > 0 && toks[toks.length - 1]!.kind !== "newline")
    toks.push({ kind: "newline", value: "\n", start: s.length, end: s.length });
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
        if (!/^[0-9a-fA-F]{2}$/.test(h))
          throw new StarlarkError("Parse error: invalid \\x escape", { start: offset + i - 1, end: offset + i + 3 }, file);
        out += String.fromCharCode(parseInt(h, 16));
        i += 2;
        break;
      }
      case "u":
      case "U": {
        const len = n === "u" ? 4 : 8;
        const h = body.slice(i + 1, i + 1 + len);
        if (!new RegExp(`^[0-9a-fA-F]{${len}}$`).test(h))
          throw new StarlarkError(`Parse error: invalid \\${n} escape`, { start: offset + i - 1, end: offset + i + 1 + len }, file);
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
