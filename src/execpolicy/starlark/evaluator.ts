/**
 * Evaluator for the Starlark subset parsed by ./parser.ts. Each file is evaluated in a fresh module scope
 * (docs/execpolicy.md, "The language"); the host supplies extra globals (the policy builtins). `load()` always
 * fails, as in Codex (no loader is installed). Errors are {@link StarlarkError}s carrying the span of the
 * offending expression.
 */
import {
  parseFile,
  StarlarkError,
  type Arg,
  type CompClause,
  type Expr,
  type Param,
  type SourceFile,
  type Span,
  type Stmt,
} from "./syntax.ts";
import { attribute, standardGlobals } from "./builtins.ts";
import { binaryOp, indexValue, normIndex, sliceValue } from "./operators.ts";
import {
  iterate,
  MAX_STEPS,
  SBuiltin,
  Scope,
  SDict,
  SFloat,
  SFunction,
  SList,
  str,
  STuple,
  truthy,
  typeName,
  type Value,
} from "./values.ts";

class ReturnSignal {
  constructor(readonly value: Value) {}
}
class BreakSignal {}
class ContinueSignal {}

/** Maximum call depth, to turn runaway recursion into an error instead of a crash. */
const MAX_DEPTH = 200;

/** Evaluates one file in a fresh module scope with `globals` (host builtins) on top of the standard ones. */
export class Evaluator {
  private depth = 0;
  private steps = 0;
  readonly module: Scope;

  constructor(
    private readonly file: SourceFile,
    globals: Record<string, Value>,
  ) {
    const base = new Scope();
    for (const [k, v] of Object.entries(standardGlobals())) base.vars.set(k, v);
    for (const [k, v] of Object.entries(globals)) base.vars.set(k, v);
    this.module = new Scope(base);
  }

  /** Parse and run the whole file. Throws {@link StarlarkError}. */
  run(): void {
    const stmts = parseFile(this.file);
    this.execBlock(stmts, this.module, true);
  }

  private error(msg: string, span: Span): StarlarkError {
    return new StarlarkError(msg, span, this.file);
  }

  private wrap<T>(span: Span, f: () => T): T {
    try {
      return f();
    } catch (e) {
      if (e instanceof StarlarkError || e instanceof ReturnSignal || e instanceof BreakSignal || e instanceof ContinueSignal) throw e;
      throw this.error(e instanceof Error ? e.message : String(e), span);
    }
  }

  private execBlock(stmts: Stmt[], scope: Scope, topLevel = false): void {
    for (const s of stmts) this.exec(s, scope, topLevel);
  }

  private exec(s: Stmt, scope: Scope, topLevel: boolean): void {
    switch (s.t) {
      case "expr":
        this.eval(s.expr, scope);
        return;
      case "assign":
        this.assign(s.target, this.eval(s.value, scope), scope);
        return;
      case "augassign": {
        const cur = this.eval(s.target, scope);
        const rhs = this.eval(s.value, scope);
        // `list += x` extends in place, like Python/Starlark.
        if (s.op === "+" && cur instanceof SList) {
          this.wrap(s.span, () => cur.items.push(...iterate(rhs)));
          return;
        }
        this.assign(
          s.target,
          this.wrap(s.span, () => binaryOp(s.op, cur, rhs)),
          scope,
        );
        return;
      }
      case "def": {
        const defaults = s.params.map((p) => (p.kind === "normal" && p.default !== undefined ? this.eval(p.default, scope) : undefined));
        scope.vars.set(s.name, new SFunction(s.name, s.params, defaults, s.body, scope, this.file));
        return;
      }
      case "if":
        this.execBlock(truthy(this.eval(s.test, scope)) ? s.body : s.orelse, scope, topLevel);
        return;
      case "for": {
        const items = this.wrap(s.iter.span, () => iterate(this.eval(s.iter, scope)));
        for (const item of items) {
          this.step(s.span);
          this.assign(s.target, item, scope);
          try {
            this.execBlock(s.body, scope, topLevel);
          } catch (e) {
            if (e instanceof BreakSignal) break;
            if (e instanceof ContinueSignal) continue;
            throw e;
          }
        }
        return;
      }
      case "return":
        if (topLevel) throw this.error("`return` outside of a function", s.span);
        throw new ReturnSignal(s.value === undefined ? null : this.eval(s.value, scope));
      case "pass":
        return;
      case "break":
        throw new BreakSignal();
      case "continue":
        throw new ContinueSignal();
      case "load":
        throw this.error(`No imports are available, you tried \`${s.module}\` (no call to \`Evaluator.set_loader\`)`, s.span);
    }
  }

  private step(span: Span): void {
    if (++this.steps > MAX_STEPS) throw this.error(`too many iterations (limit ${MAX_STEPS})`, span);
  }

  private assign(target: Expr, v: Value, scope: Scope): void {
    switch (target.t) {
      case "name":
        scope.vars.set(target.name, v);
        return;
      case "tuple":
      case "list": {
        const items = this.wrap(target.span, () => iterate(v));
        if (items.length !== target.items.length) {
          throw this.error(`Unpacked ${items.length} values but expected ${target.items.length}`, target.span);
        }
        target.items.forEach((t, i) => this.assign(t, items[i]!, scope));
        return;
      }
      case "index": {
        const obj = this.eval(target.obj, scope);
        const key = this.eval(target.index, scope);
        this.wrap(target.span, () => {
          if (obj instanceof SDict) obj.set(key, v);
          else if (obj instanceof SList) obj.items[normIndex(key, obj.items.length)] = v;
          else throw new Error(`Object of type \`${typeName(obj)}\` does not support item assignment`);
        });
        return;
      }
      default:
        throw this.error("cannot assign to this expression", target.span);
    }
  }

  /** Evaluate an expression. */
  eval(e: Expr, scope: Scope): Value {
    switch (e.t) {
      case "lit":
        if (typeof e.value === "bigint") throw this.error("Integer overflow", e.span);
        return e.float ? new SFloat(e.value as number) : (e.value as Value);
      case "fstr":
        return e.parts.map((p) => (typeof p === "string" ? p : str(this.eval(p, scope)))).join("");
      case "name": {
        const v = scope.lookup(e.name);
        if (v === undefined) throw this.error(`Variable \`${e.name}\` not found`, e.span);
        return v;
      }
      case "list":
        return new SList(e.items.map((x) => this.eval(x, scope)));
      case "tuple":
        return new STuple(e.items.map((x) => this.eval(x, scope)));
      case "dict": {
        const d = new SDict();
        for (const [k, v] of e.entries) {
          const kv = this.eval(k, scope);
          this.wrap(k.span, () => d.set(kv, this.eval(v, scope)));
        }
        return d;
      }
      case "listcomp": {
        const out: Value[] = [];
        this.comprehension(e.clauses, 0, new Scope(scope), (s) => out.push(this.eval(e.elt, s)));
        return new SList(out);
      }
      case "dictcomp": {
        const d = new SDict();
        this.comprehension(e.clauses, 0, new Scope(scope), (s) => {
          const k = this.eval(e.key, s);
          this.wrap(e.key.span, () => d.set(k, this.eval(e.value, s)));
        });
        return d;
      }
      case "call":
        return this.call(e, scope);
      case "index": {
        const obj = this.eval(e.obj, scope);
        const idx = this.eval(e.index, scope);
        return this.wrap(e.span, () => indexValue(obj, idx));
      }
      case "slice": {
        const obj = this.eval(e.obj, scope);
        const [lo, hi, step] = [e.lo, e.hi, e.step].map((x) => (x === undefined ? null : this.eval(x, scope)));
        return this.wrap(e.span, () => sliceValue(obj, lo!, hi!, step!));
      }
      case "attr": {
        const obj = this.eval(e.obj, scope);
        return this.wrap(e.span, () => attribute(obj, e.name));
      }
      case "unary": {
        const v = this.eval(e.operand, scope);
        return this.wrap(e.span, () => {
          if (e.op === "not") return !truthy(v);
          if (e.op === "-" && typeof v === "number") return -v;
          if (e.op === "-" && v instanceof SFloat) return new SFloat(-v.v);
          if (e.op === "+" && (typeof v === "number" || v instanceof SFloat)) return v;
          if (e.op === "~" && typeof v === "number") return ~v;
          throw new Error(`Operation \`${e.op}\` not supported on type \`${typeName(v)}\``);
        });
      }
      case "binary": {
        if (e.op === "and") {
          const l = this.eval(e.left, scope);
          return truthy(l) ? this.eval(e.right, scope) : l;
        }
        if (e.op === "or") {
          const l = this.eval(e.left, scope);
          return truthy(l) ? l : this.eval(e.right, scope);
        }
        const l = this.eval(e.left, scope);
        const r = this.eval(e.right, scope);
        return this.wrap(e.span, () => binaryOp(e.op, l, r));
      }
      case "cond":
        return truthy(this.eval(e.test, scope)) ? this.eval(e.then, scope) : this.eval(e.else, scope);
      case "lambda": {
        const defaults = e.params.map((p) => (p.kind === "normal" && p.default !== undefined ? this.eval(p.default, scope) : undefined));
        return new SFunction("lambda", e.params, defaults, e.body, scope, this.file);
      }
    }
  }

  private comprehension(clauses: CompClause[], i: number, scope: Scope, emit: (s: Scope) => void): void {
    if (i === clauses.length) return emit(scope);
    const c = clauses[i]!;
    if (c.t === "if") {
      if (truthy(this.eval(c.cond, scope))) this.comprehension(clauses, i + 1, scope, emit);
      return;
    }
    const items = this.wrap(c.iter.span, () => iterate(this.eval(c.iter, scope)));
    for (const item of items) {
      this.step(c.iter.span);
      this.assign(c.target, item, scope);
      this.comprehension(clauses, i + 1, scope, emit);
    }
  }

  private call(e: Extract<Expr, { t: "call" }>, scope: Scope): Value {
    const fn = this.eval(e.fn, scope);
    const args: Value[] = [];
    const kwargs: [string, Value][] = [];
    for (const a of e.args as Arg[]) {
      if (a.kind === "pos") args.push(this.eval(a.value, scope));
      else if (a.kind === "named") {
        if (kwargs.some(([k]) => k === a.name)) throw this.error(`Multiple occurrences of named parameter \`${a.name}\``, a.span);
        kwargs.push([a.name, this.eval(a.value, scope)]);
      } else if (a.kind === "star") args.push(...this.wrap(a.value.span, () => iterate(this.eval(a.value, scope))));
      else {
        const d = this.eval(a.value, scope);
        if (!(d instanceof SDict)) throw this.error(`Argument after ** must be a dict, not ${typeName(d)}`, a.value.span);
        for (const [k, v] of d.map.values()) {
          if (typeof k !== "string") throw this.error("keywords must be strings", a.value.span);
          kwargs.push([k, v]);
        }
      }
    }
    return this.invoke(fn, args, kwargs, e.span);
  }

  /** Call a function value. */
  invoke(fn: Value, args: Value[], kwargs: [string, Value][], span: Span): Value {
    if (fn instanceof SBuiltin) {
      const site = { span, file: this.file };
      try {
        return fn.call(args, kwargs, site);
      } catch (e) {
        if (e instanceof StarlarkError) throw e;
        throw this.error(e instanceof Error ? e.message : String(e), span);
      }
    }
    if (!(fn instanceof SFunction)) throw this.error(`Object of type \`${typeName(fn)}\` is not callable`, span);
    if (++this.depth > MAX_DEPTH) throw this.error("Starlark call stack overflow", span);
    try {
      const local = new Scope(fn.closure);
      this.bindParams(fn, args, kwargs, local, span);
      if (!Array.isArray(fn.body)) return this.eval(fn.body, local);
      try {
        this.execBlock(fn.body, local);
      } catch (e) {
        if (e instanceof ReturnSignal) return e.value;
        throw e;
      }
      return null;
    } finally {
      this.depth--;
    }
  }

  private bindParams(fn: SFunction, args: Value[], kwargs: [string, Value][], local: Scope, span: Span): void {
    const rest = [...args];
    const kw = new Map(kwargs);
    let star: Param | undefined;
    let starstar: Param | undefined;
    let afterStar = false;
    fn.params.forEach((p, i) => {
      if (p.kind === "star") {
        star = p;
        afterStar = true;
        if (p.name !== undefined) local.vars.set(p.name, new STuple(rest.splice(0)));
        return;
      }
      if (p.kind === "starstar") {
        starstar = p;
        return;
      }
      if (!afterStar && rest.length > 0) {
        if (kw.has(p.name)) throw this.error(`Multiple values for parameter \`${p.name}\``, span);
        local.vars.set(p.name, rest.shift()!);
      } else if (kw.has(p.name)) {
        local.vars.set(p.name, kw.get(p.name)!);
        kw.delete(p.name);
      } else if (fn.defaults[i] !== undefined) local.vars.set(p.name, fn.defaults[i]!);
      else throw this.error(`Missing parameter \`${p.name}\` for call to \`${fn.name}\``, span);
    });
    if (rest.length > 0 && star === undefined)
      throw this.error(`Found ${rest.length} extra positional parameter(s) for call to ${fn.name}`, span);
    if (kw.size > 0) {
      if (starstar === undefined)
        throw this.error(`Found \`${[...kw.keys()].join("`, `")}\` extra named parameter(s) for call to ${fn.name}`, span);
      const d = new SDict();
      for (const [k, v] of kw) d.set(k, v);
      local.vars.set((starstar as { name: string }).name, d);
    } else if (starstar !== undefined) local.vars.set((starstar as { name: string }).name, new SDict());
  }
}
