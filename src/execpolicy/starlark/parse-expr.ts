/**
 * Expression parser for rules files: the token cursor and every expression form (lambda, conditional, `or`/`and`/
 * `not`, comparisons, binary operators by precedence, calls, subscripts and slices, literals, comprehensions,
 * f-strings), plus assignment targets and parameter lists, which expressions share with statements.
 * Statements are parsed by the subclass in parser.ts.
 */
import type { Arg, CompClause, Expr, Param } from "./ast.ts";
import { StarlarkError, type SourceFile } from "./diagnostics.ts";
import { decodeEscapes, describeToken, KEYWORDS, tokenize, type Token, type TokKind } from "./lexer.ts";

export class ExprParser {
  protected p = 0;

  constructor(
    protected readonly src: SourceFile,
    protected readonly toks: Token[],
  ) {}

  protected get tok(): Token {
    return this.toks[this.p]!;
  }

  /** Kind of the current token (a method, so TypeScript does not narrow it across `this.p++`). */
  protected k(): TokKind {
    return this.toks[this.p]!.kind;
  }

  protected fail(expected: string, t: Token = this.tok): never {
    throw new StarlarkError(
      `Parse error: unexpected ${describeToken(t)}, expected ${expected}`,
      { start: t.start, end: Math.max(t.end, t.start + 1) },
      this.src,
    );
  }

  protected isOp(v: string): boolean {
    return this.k() === "op" && this.tok.value === v;
  }

  protected isKw(v: string): boolean {
    return this.k() === "name" && this.tok.value === v;
  }

  protected eatOp(v: string): boolean {
    if (this.isOp(v)) {
      this.p++;
      return true;
    }
    return false;
  }

  protected expectOp(v: string): Token {
    if (!this.isOp(v)) this.fail(`'${v}'`);
    return this.toks[this.p++]!;
  }

  protected expectKw(v: string): Token {
    if (!this.isKw(v)) this.fail(`keyword '${v}'`);
    return this.toks[this.p++]!;
  }

  protected ident(): Token {
    if (this.k() !== "name" || KEYWORDS.has(this.tok.value)) this.fail("identifier");
    return this.toks[this.p++]!;
  }

  protected checkTarget(e: Expr): void {
    if (e.t === "name" || e.t === "index" || e.t === "attr") return;
    if ((e.t === "tuple" || e.t === "list") && e.items.length > 0) return e.items.forEach((x) => this.checkTarget(x));
    throw new StarlarkError("Parse error: left-hand side of assignment is not assignable", e.span, this.src);
  }

  protected params(close: string): Param[] {
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

  protected loopTarget(): Expr {
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
  protected exprList(): Expr {
    const first = this.test();
    if (!this.isOp(",")) return first;
    const items = [first];
    while (this.eatOp(",")) {
      if (this.k() === "newline" || this.k() === "eof" || this.isOp("=") || this.isOp(")") || this.isOp(";")) break;
      items.push(this.test());
    }
    return { t: "tuple", items, span: { start: first.span.start, end: items[items.length - 1]!.span.end } };
  }

  protected test(): Expr {
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

  protected orExpr(): Expr {
    let e = this.andExpr();
    while (this.isKw("or")) {
      this.p++;
      const r = this.andExpr();
      e = { t: "binary", op: "or", left: e, right: r, span: { start: e.span.start, end: r.span.end } };
    }
    return e;
  }

  protected andExpr(): Expr {
    let e = this.notExpr();
    while (this.isKw("and")) {
      this.p++;
      const r = this.notExpr();
      e = { t: "binary", op: "and", left: e, right: r, span: { start: e.span.start, end: r.span.end } };
    }
    return e;
  }

  protected notExpr(): Expr {
    if (this.isKw("not")) {
      const t = this.toks[this.p++]!;
      const operand = this.notExpr();
      return { t: "unary", op: "not", operand, span: { start: t.start, end: operand.span.end } };
    }
    return this.comparison();
  }

  protected comparison(): Expr {
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

  protected binLevel(ops: string[], next: () => Expr): Expr {
    let e = next();
    while (this.k() === "op" && ops.includes(this.tok.value)) {
      const op = this.toks[this.p++]!.value;
      const r = next();
      e = { t: "binary", op, left: e, right: r, span: { start: e.span.start, end: r.span.end } };
    }
    return e;
  }

  protected bitOr = (): Expr => this.binLevel(["|"], this.bitXor);
  protected bitXor = (): Expr => this.binLevel(["^"], this.bitAnd);
  protected bitAnd = (): Expr => this.binLevel(["&"], this.shift);
  protected shift = (): Expr => this.binLevel(["<<", ">>"], this.arith);
  protected arith = (): Expr => this.binLevel(["+", "-"], this.term);
  protected term = (): Expr => this.binLevel(["*", "/", "//", "%"], this.unary);

  protected unary = (): Expr => {
    if (this.k() === "op" && ["-", "+", "~"].includes(this.tok.value)) {
      const t = this.toks[this.p++]!;
      const operand = this.unary();
      return { t: "unary", op: t.value, operand, span: { start: t.start, end: operand.span.end } };
    }
    return this.primary();
  };

  protected primary(): Expr {
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

  protected subscript(obj: Expr): Expr {
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

  protected callArgs(): Arg[] {
    const args: Arg[] = [];
    while (!this.isOp(")")) {
      if (this.eatOp("**")) args.push({ kind: "starstar", value: this.test() });
      else if (this.eatOp("*")) args.push({ kind: "star", value: this.test() });
      else if (
        this.k() === "name" &&
        !KEYWORDS.has(this.tok.value) &&
        this.toks[this.p + 1]?.kind === "op" &&
        this.toks[this.p + 1]!.value === "="
      ) {
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

  protected atom(): Expr {
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

  protected parenExpr(): Expr {
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

  protected compClauses(close: string): CompClause[] {
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

  protected listExpr(): Expr {
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

  protected dictExpr(): Expr {
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
  protected fstringParts(t: Token): (string | Expr)[] {
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
        const sub = new ExprParser(inner, toks);
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
