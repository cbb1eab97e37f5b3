/**
 * Parser for rules files: statements (`def`, `if`/`elif`/`else`, `for`, `load`, assignments, `pass`/`break`/
 * `continue`/`return`, simple statements joined by `;`) on top of the expression parser in parse-expr.ts.
 * Failures throw {@link StarlarkError} in starlark-rust's wording (`Parse error: unexpected new line, expected
 * expression`).
 */
import type { Stmt } from "./ast.ts";
import type { SourceFile } from "./diagnostics.ts";
import { StarlarkError } from "./diagnostics.ts";
import { tokenize } from "./lexer.ts";
import { ExprParser } from "./parse-expr.ts";

/** Parse a whole rules file into statements. Throws StarlarkError on the first syntax error. */
export function parseFile(file: SourceFile): Stmt[] {
  return new Parser(file, tokenize(file)).file();
}

class Parser extends ExprParser {
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

  protected statement(): Stmt[] {
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

  protected simple(): Stmt {
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

  protected loadStmt(): Stmt {
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

  protected block(): Stmt[] {
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

  protected defStmt(): Stmt {
    const t = this.toks[this.p++]!;
    const name = this.ident().value;
    this.expectOp("(");
    const params = this.params(")");
    this.expectOp(")");
    if (this.eatOp("->")) this.test();
    const body = this.block();
    return { t: "def", name, params, body, span: { start: t.start, end: this.toks[this.p - 1]!.end } };
  }

  protected ifStmt(): Stmt {
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

  protected forStmt(): Stmt {
    const t = this.toks[this.p++]!;
    const target = this.loopTarget();
    this.expectKw("in");
    const iter = this.exprList();
    const body = this.block();
    return { t: "for", target, iter, body, span: { start: t.start, end: this.toks[this.p - 1]!.end } };
  }
}
