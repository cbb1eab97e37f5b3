/**
 * Evaluator for the Starlark subset parsed by ./syntax.ts.
 *
 * Values: string, int (JS safe integers), float ({@link SFloat}), bool, None (`null`), list ({@link SList}),
 * tuple ({@link STuple}), dict ({@link SDict}, insertion-ordered), functions (`def`/`lambda`) and builtins.
 * Each file is evaluated in a fresh module scope (execpolicy.md §1.1); the host supplies extra globals
 * (the policy builtins). `load()` always fails, as in Codex (no loader is installed).
 * Errors are {@link StarlarkError}s carrying the span of the offending expression.
 */
import { parseFile, StarlarkError, type Arg, type CompClause, type Expr, type Param, type SourceFile, type Span, type Stmt } from "./syntax.ts";

/** A Starlark float (kept distinct from int so `type()` and formatting are right). */
export class SFloat {
  constructor(readonly v: number) {}
}
/** A mutable Starlark list. */
export class SList {
  constructor(public items: Value[]) {}
}
/** An immutable Starlark tuple. */
export class STuple {
  constructor(readonly items: Value[]) {}
}
/** A Starlark dict: insertion-ordered, keyed by a canonical string of the (hashable) key. */
export class SDict {
  readonly map = new Map<string, [Value, Value]>();
  get(k: Value): Value | undefined {
    return this.map.get(hashKey(k))?.[1];
  }
  set(k: Value, v: Value): void {
    this.map.set(hashKey(k), [k, v]);
  }
}

/** Calling context handed to builtins: where the call is, for error spans. */
export interface CallSite {
  span: Span;
  file: SourceFile;
}

/** A builtin function (or a method bound to a receiver). */
export class SBuiltin {
  constructor(
    readonly name: string,
    readonly call: (args: Value[], kwargs: [string, Value][], site: CallSite) => Value,
  ) {}
}

/** A `def` or `lambda` function value. */
export class SFunction {
  constructor(
    readonly name: string,
    readonly params: Param[],
    readonly defaults: (Value | undefined)[],
    readonly body: Stmt[] | Expr,
    readonly closure: Scope,
    readonly file: SourceFile,
  ) {}
}

/** Every Starlark value. */
export type Value = string | number | boolean | null | SFloat | SList | STuple | SDict | SBuiltin | SFunction;

/** Variable scope: a map plus the enclosing scope. */
export class Scope {
  readonly vars = new Map<string, Value>();
  constructor(readonly parent?: Scope) {}
  lookup(name: string): Value | undefined {
    for (let s: Scope | undefined = this; s; s = s.parent) if (s.vars.has(name)) return s.vars.get(name);
    return undefined;
  }
}

/** Starlark type name of `v` (`string`, `int`, `list`, `NoneType`, …), as starlark-rust prints it. */
export function typeName(v: Value): string {
  if (v === null) return "NoneType";
  if (typeof v === "string") return "string";
  if (typeof v === "number") return "int";
  if (typeof v === "boolean") return "bool";
  if (v instanceof SFloat) return "float";
  if (v instanceof SList) return "list";
  if (v instanceof STuple) return "tuple";
  if (v instanceof SDict) return "dict";
  return "function";
}

/** `repr(v)`. */
export function repr(v: Value): string {
  if (v === null) return "None";
  if (typeof v === "boolean") return v ? "True" : "False";
  if (typeof v === "number") return String(v);
  if (typeof v === "string") return JSON.stringify(v);
  if (v instanceof SFloat) return Number.isInteger(v.v) ? `${v.v}.0` : String(v.v);
  if (v instanceof SList) return `[${v.items.map(repr).join(", ")}]`;
  if (v instanceof STuple) return v.items.length === 1 ? `(${repr(v.items[0]!)},)` : `(${v.items.map(repr).join(", ")})`;
  if (v instanceof SDict) return `{${[...v.map.values()].map(([k, x]) => `${repr(k)}: ${repr(x)}`).join(", ")}}`;
  if (v instanceof SBuiltin) return `<built-in function ${v.name}>`;
  return `<function ${v.name}>`;
}

/** `str(v)`: strings as-is, everything else as `repr`. */
export function str(v: Value): string {
  return typeof v === "string" ? v : repr(v);
}

function hashKey(k: Value): string {
  if (k === null || typeof k === "string" || typeof k === "number" || typeof k === "boolean") return `${typeName(k)}:${String(k)}`;
  if (k instanceof SFloat) return Number.isInteger(k.v) ? `int:${k.v}` : `float:${k.v}`;
  if (k instanceof STuple) return `tuple:(${k.items.map(hashKey).join(",")})`;
  throw new Error(`Value of type \`${typeName(k)}\` is not hashable`);
}

/** Starlark truthiness. */
export function truthy(v: Value): boolean {
  if (v === null || v === false || v === 0 || v === "") return false;
  if (v instanceof SFloat) return v.v !== 0;
  if (v instanceof SList || v instanceof STuple) return v.items.length > 0;
  if (v instanceof SDict) return v.map.size > 0;
  return true;
}

function equals(a: Value, b: Value): boolean {
  if (a instanceof SFloat || b instanceof SFloat) {
    const x = a instanceof SFloat ? a.v : a;
    const y = b instanceof SFloat ? b.v : b;
    return typeof x === "number" && typeof y === "number" && x === y;
  }
  if ((a instanceof SList && b instanceof SList) || (a instanceof STuple && b instanceof STuple)) {
    return a.items.length === b.items.length && a.items.every((x, i) => equals(x, b.items[i]!));
  }
  if (a instanceof SDict && b instanceof SDict) {
    if (a.map.size !== b.map.size) return false;
    for (const [k, [, v]] of a.map) {
      const o = b.map.get(k);
      if (o === undefined || !equals(v, o[1])) return false;
    }
    return true;
  }
  return a === b;
}

function compare(a: Value, b: Value): number {
  const num = (x: Value) => (x instanceof SFloat ? x.v : typeof x === "number" ? x : undefined);
  const x = num(a);
  const y = num(b);
  if (x !== undefined && y !== undefined) return x < y ? -1 : x > y ? 1 : 0;
  if (typeof a === "string" && typeof b === "string") return a < b ? -1 : a > b ? 1 : 0;
  if (typeof a === "boolean" && typeof b === "boolean") return Number(a) - Number(b);
  if ((a instanceof SList && b instanceof SList) || (a instanceof STuple && b instanceof STuple)) {
    for (let i = 0; i < Math.min(a.items.length, b.items.length); i++) {
      const c = compare(a.items[i]!, b.items[i]!);
      if (c !== 0) return c;
    }
    return a.items.length - b.items.length;
  }
  throw new Error(`Operation \`<\` not supported for types \`${typeName(a)}\` and \`${typeName(b)}\``);
}

function iterate(v: Value): Value[] {
  if (v instanceof SList || v instanceof STuple) return [...v.items];
  if (v instanceof SDict) return [...v.map.values()].map(([k]) => k);
  throw new Error(`Operation \`iter\` not supported on type \`${typeName(v)}\``);
}

function checkInt(n: number): number {
  if (!Number.isSafeInteger(n)) throw new Error("Integer overflow");
  return n;
}

class ReturnSignal {
  constructor(readonly value: Value) {}
}
class BreakSignal {}
class ContinueSignal {}

/** Maximum call depth, to turn runaway recursion into an error instead of a crash. */
const MAX_DEPTH = 200;
/** Maximum loop iterations per file, against accidental infinite work (Starlark has no `while`, but `range` can be huge). */
const MAX_STEPS = 10_000_000;

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
        this.assign(s.target, this.wrap(s.span, () => binaryOp(s.op, cur, rhs)), scope);
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
    if (rest.length > 0 && star === undefined) throw this.error(`Found ${rest.length} extra positional parameter(s) for call to ${fn.name}`, span);
    if (kw.size > 0) {
      if (starstar === undefined) throw this.error(`Found \`${[...kw.keys()].join("`, `")}\` extra named parameter(s) for call to ${fn.name}`, span);
      const d = new SDict();
      for (const [k, v] of kw) d.set(k, v);
      local.vars.set((starstar as { name: string }).name, d);
    } else if (starstar !== undefined) local.vars.set((starstar as { name: string }).name, new SDict());
  }
}

function normIndex(i: Value, len: number): number {
  if (typeof i !== "number") throw new Error(`Indices must be integers, not ${typeName(i)}`);
  const j = i < 0 ? i + len : i;
  if (j < 0 || j >= len) throw new Error(`Index \`${i}\` is out of bound`);
  return j;
}

function indexValue(obj: Value, idx: Value): Value {
  if (obj instanceof SList || obj instanceof STuple) return obj.items[normIndex(idx, obj.items.length)]!;
  if (typeof obj === "string") return obj[normIndex(idx, obj.length)]!;
  if (obj instanceof SDict) {
    const v = obj.get(idx);
    if (v === undefined) throw new Error(`Key \`${repr(idx)}\` not found`);
    return v;
  }
  throw new Error(`Object of type \`${typeName(obj)}\` is not subscriptable`);
}

function sliceValue(obj: Value, lo: Value, hi: Value, step: Value): Value {
  const st = step === null ? 1 : step;
  if (typeof st !== "number" || st === 0) throw new Error("slice step must be a non-zero integer");
  const seq = typeof obj === "string" ? [...obj] : obj instanceof SList || obj instanceof STuple ? obj.items : undefined;
  if (seq === undefined) throw new Error(`Object of type \`${typeName(obj)}\` cannot be sliced`);
  const n = seq.length;
  const clamp = (v: Value, dflt: number, min: number, max: number) => {
    if (v === null) return dflt;
    if (typeof v !== "number") throw new Error("slice indices must be integers");
    const x = v < 0 ? v + n : v;
    return Math.min(Math.max(x, min), max);
  };
  const out: Value[] = [];
  if (st > 0) for (let i = clamp(lo, 0, 0, n); i < clamp(hi, n, 0, n); i += st) out.push(seq[i]!);
  else for (let i = clamp(lo, n - 1, -1, n - 1); i > clamp(hi, -1, -1, n - 1); i += st) out.push(seq[i]!);
  if (typeof obj === "string") return (out as string[]).join("");
  return obj instanceof STuple ? new STuple(out) : new SList(out);
}

/** Binary operators (arithmetic, comparison, membership, concatenation, `%` formatting). */
function binaryOp(op: string, l: Value, r: Value): Value {
  const isNum = (x: Value) => typeof x === "number" || x instanceof SFloat;
  const nv = (x: Value) => (x instanceof SFloat ? x.v : (x as number));
  const anyFloat = l instanceof SFloat || r instanceof SFloat;
  switch (op) {
    case "==":
      return equals(l, r);
    case "!=":
      return !equals(l, r);
    case "<":
      return compare(l, r) < 0;
    case ">":
      return compare(l, r) > 0;
    case "<=":
      return compare(l, r) <= 0;
    case ">=":
      return compare(l, r) >= 0;
    case "in":
    case "not in": {
      let found: boolean;
      if (typeof r === "string") {
        if (typeof l !== "string") throw new Error(`Operation \`in\` not supported for types \`${typeName(l)}\` and \`string\``);
        found = r.includes(l);
      } else if (r instanceof SDict) found = r.get(l) !== undefined;
      else if (r instanceof SList || r instanceof STuple) found = r.items.some((x) => equals(x, l));
      else throw new Error(`Operation \`in\` not supported for types \`${typeName(l)}\` and \`${typeName(r)}\``);
      return op === "in" ? found : !found;
    }
    case "+":
      if (typeof l === "string" && typeof r === "string") return l + r;
      if (l instanceof SList && r instanceof SList) return new SList([...l.items, ...r.items]);
      if (l instanceof STuple && r instanceof STuple) return new STuple([...l.items, ...r.items]);
      if (isNum(l) && isNum(r)) return anyFloat ? new SFloat(nv(l) + nv(r)) : checkInt((l as number) + (r as number));
      break;
    case "-":
      if (isNum(l) && isNum(r)) return anyFloat ? new SFloat(nv(l) - nv(r)) : checkInt((l as number) - (r as number));
      break;
    case "*":
      if (isNum(l) && isNum(r)) return anyFloat ? new SFloat(nv(l) * nv(r)) : checkInt((l as number) * (r as number));
      if (typeof l === "string" && typeof r === "number") return l.repeat(Math.max(0, r));
      if (typeof l === "number" && typeof r === "string") return r.repeat(Math.max(0, l));
      if (l instanceof SList && typeof r === "number") return new SList(Array.from({ length: Math.max(0, r) }, () => l.items).flat());
      if (l instanceof STuple && typeof r === "number") return new STuple(Array.from({ length: Math.max(0, r) }, () => l.items).flat());
      break;
    case "/":
      if (isNum(l) && isNum(r)) {
        if (nv(r) === 0) throw new Error("Division by zero");
        return new SFloat(nv(l) / nv(r));
      }
      break;
    case "//":
      if (isNum(l) && isNum(r)) {
        if (nv(r) === 0) throw new Error("Division by zero");
        return anyFloat ? new SFloat(Math.floor(nv(l) / nv(r))) : Math.floor((l as number) / (r as number));
      }
      break;
    case "%":
      if (typeof l === "string") return percentFormat(l, r);
      if (isNum(l) && isNum(r)) {
        if (nv(r) === 0) throw new Error("Division by zero");
        const m = ((nv(l) % nv(r)) + nv(r)) % nv(r);
        return anyFloat ? new SFloat(m) : m;
      }
      break;
    case "|":
      if (typeof l === "number" && typeof r === "number") return l | r;
      if (l instanceof SDict && r instanceof SDict) {
        const d = new SDict();
        for (const [k, v] of [...l.map.values(), ...r.map.values()]) d.set(k, v);
        return d;
      }
      break;
    case "&":
      if (typeof l === "number" && typeof r === "number") return l & r;
      break;
    case "^":
      if (typeof l === "number" && typeof r === "number") return l ^ r;
      break;
    case "<<":
      if (typeof l === "number" && typeof r === "number") return checkInt(l * 2 ** r);
      break;
    case ">>":
      if (typeof l === "number" && typeof r === "number") return Math.floor(l / 2 ** r);
      break;
  }
  throw new Error(`Operation \`${op}\` not supported for types \`${typeName(l)}\` and \`${typeName(r)}\``);
}

function percentFormat(fmt: string, arg: Value): string {
  const args = arg instanceof STuple ? [...arg.items] : [arg];
  const out = fmt.replace(/%([sdr%])/g, (_, c: string) => {
    if (c === "%") return "%";
    if (args.length === 0) throw new Error("not enough arguments for format string");
    const v = args.shift()!;
    if (c === "s") return str(v);
    if (c === "r") return repr(v);
    if (typeof v !== "number") throw new Error(`%d format requires an integer, not ${typeName(v)}`);
    return String(v);
  });
  if (args.length > 0) throw new Error("too many arguments for format string");
  return out;
}

// ---------------------------------------------------------------------------------------------------------
// standard globals and methods

function builtin(name: string, f: (args: Value[], kwargs: [string, Value][]) => Value): SBuiltin {
  return new SBuiltin(name, (a, k) => f(a, k));
}

function noKwargs(name: string, kwargs: [string, Value][]): void {
  if (kwargs.length > 0) throw new Error(`Found \`${kwargs.map(([k]) => k).join("`, `")}\` extra named parameter(s) for call to ${name}`);
}

function arity(name: string, args: Value[], min: number, max: number): void {
  if (args.length < min) throw new Error(`Missing parameter for call to \`${name}\``);
  if (args.length > max) throw new Error(`Found ${args.length - max} extra positional parameter(s) for call to ${name}`);
}

function expectType<T extends Value>(v: Value, want: string, param: string, ok: (v: Value) => v is T): T {
  if (!ok(v)) throw new Error(`Type of parameter \`${param}\` doesn't match, expected \`${want}\`, actual \`${typeName(v)} (repr: ${repr(v)})\``);
  return v;
}

const isStr = (v: Value): v is string => typeof v === "string";
const isInt = (v: Value): v is number => typeof v === "number";

/** The standard Starlark globals available in rules files (no `print`, `json`, `struct`, as in Codex). */
function standardGlobals(): Record<string, Value> {
  return {
    len: builtin("len", (a, k) => {
      noKwargs("len", k);
      arity("len", a, 1, 1);
      const v = a[0]!;
      if (typeof v === "string") return [...v].length;
      if (v instanceof SList || v instanceof STuple) return v.items.length;
      if (v instanceof SDict) return v.map.size;
      throw new Error(`Operation \`len\` not supported on type \`${typeName(v)}\``);
    }),
    list: builtin("list", (a, k) => (noKwargs("list", k), arity("list", a, 0, 1), new SList(a.length ? iterate(a[0]!) : []))),
    tuple: builtin("tuple", (a, k) => (noKwargs("tuple", k), arity("tuple", a, 0, 1), new STuple(a.length ? iterate(a[0]!) : []))),
    dict: builtin("dict", (a, k) => {
      arity("dict", a, 0, 1);
      const d = new SDict();
      if (a.length) {
        if (a[0] instanceof SDict) for (const [kk, v] of a[0].map.values()) d.set(kk, v);
        else
          for (const pair of iterate(a[0]!)) {
            const kv = iterate(pair);
            if (kv.length !== 2) throw new Error("dict: each element must be a pair");
            d.set(kv[0]!, kv[1]!);
          }
      }
      for (const [kk, v] of k) d.set(kk, v);
      return d;
    }),
    range: builtin("range", (a, k) => {
      noKwargs("range", k);
      arity("range", a, 1, 3);
      a.forEach((x, i) => expectType(x, "int", ["start", "stop", "step"][i]!, isInt));
      const [start, stop, step] = a.length === 1 ? [0, a[0] as number, 1] : [a[0] as number, a[1] as number, (a[2] as number | undefined) ?? 1];
      if (step === 0) throw new Error("range() step must not be zero");
      const out: Value[] = [];
      for (let i = start; step > 0 ? i < stop : i > stop; i += step) {
        out.push(i);
        if (out.length > MAX_STEPS) throw new Error("range too large");
      }
      return new SList(out);
    }),
    str: builtin("str", (a, k) => (noKwargs("str", k), arity("str", a, 1, 1), str(a[0]!))),
    repr: builtin("repr", (a, k) => (noKwargs("repr", k), arity("repr", a, 1, 1), repr(a[0]!))),
    bool: builtin("bool", (a, k) => (noKwargs("bool", k), arity("bool", a, 0, 1), a.length ? truthy(a[0]!) : false)),
    int: builtin("int", (a, k) => {
      noKwargs("int", k);
      arity("int", a, 1, 2);
      const v = a[0]!;
      if (typeof v === "number") return v;
      if (typeof v === "boolean") return Number(v);
      if (v instanceof SFloat) return Math.trunc(v.v);
      if (typeof v === "string") {
        const base = (a[1] as number | undefined) ?? 10;
        const t = v.trim();
        if (!/^[+-]?[0-9a-zA-Z]+$/.test(t) || Number.isNaN(parseInt(t, base))) throw new Error(`${repr(v)} is not a valid number in base ${base}`);
        return checkInt(parseInt(t, base));
      }
      throw new Error(`int() argument must be a string, a number or a bool, not ${typeName(v)}`);
    }),
    type: builtin("type", (a, k) => (noKwargs("type", k), arity("type", a, 1, 1), typeName(a[0]!))),
    sorted: builtin("sorted", (a, k) => {
      arity("sorted", a, 1, 1);
      const rev = k.find(([n]) => n === "reverse")?.[1];
      const key = k.find(([n]) => n === "key")?.[1];
      if (key !== undefined && key !== null) throw new Error("sorted(key=…) is not supported in rules files");
      const items = iterate(a[0]!).sort(compare);
      return new SList(rev !== undefined && truthy(rev) ? items.reverse() : items);
    }),
    reversed: builtin("reversed", (a, k) => (noKwargs("reversed", k), arity("reversed", a, 1, 1), new SList(iterate(a[0]!).reverse()))),
    enumerate: builtin("enumerate", (a, k) => {
      noKwargs("enumerate", k);
      arity("enumerate", a, 1, 2);
      const start = (a[1] as number | undefined) ?? 0;
      return new SList(iterate(a[0]!).map((v, i) => new STuple([i + start, v])));
    }),
    zip: builtin("zip", (a, k) => {
      noKwargs("zip", k);
      const lists = a.map(iterate);
      const n = lists.length === 0 ? 0 : Math.min(...lists.map((l) => l.length));
      return new SList(Array.from({ length: n }, (_, i) => new STuple(lists.map((l) => l[i]!))));
    }),
    any: builtin("any", (a, k) => (noKwargs("any", k), arity("any", a, 1, 1), iterate(a[0]!).some(truthy))),
    all: builtin("all", (a, k) => (noKwargs("all", k), arity("all", a, 1, 1), iterate(a[0]!).every(truthy))),
    min: builtin("min", (a, k) => {
      noKwargs("min", k);
      const items = a.length === 1 ? iterate(a[0]!) : a;
      if (items.length === 0) throw new Error("min() arg is an empty sequence");
      return items.reduce((m, x) => (compare(x, m) < 0 ? x : m));
    }),
    max: builtin("max", (a, k) => {
      noKwargs("max", k);
      const items = a.length === 1 ? iterate(a[0]!) : a;
      if (items.length === 0) throw new Error("max() arg is an empty sequence");
      return items.reduce((m, x) => (compare(x, m) > 0 ? x : m));
    }),
    hasattr: builtin("hasattr", (a) => {
      arity("hasattr", a, 2, 2);
      try {
        attribute(a[0]!, expectType(a[1]!, "string", "name", isStr));
        return true;
      } catch {
        return false;
      }
    }),
    getattr: builtin("getattr", (a) => {
      arity("getattr", a, 2, 3);
      try {
        return attribute(a[0]!, expectType(a[1]!, "string", "name", isStr));
      } catch (e) {
        if (a.length === 3) return a[2]!;
        throw e;
      }
    }),
    fail: builtin("fail", (a) => {
      throw new Error(`fail: ${a.map(str).join(" ")}`);
    }),
  };
}

/** `obj.name`: the methods of strings, lists and dicts. */
function attribute(obj: Value, name: string): Value {
  const m = (f: (a: Value[], k: [string, Value][]) => Value) => builtin(`${typeName(obj)}.${name}`, f);
  if (typeof obj === "string") {
    const s = obj;
    switch (name) {
      case "join":
        return m((a) => iterate(a[0]!).map((x) => expectType(x, "string", "element", isStr)).join(s));
      case "split":
        return m((a) => {
          const sep = a[0] === undefined || a[0] === null ? undefined : expectType(a[0], "string", "sep", isStr);
          const parts = sep === undefined ? s.trim().split(/\s+/).filter((x) => x !== "") : s.split(sep);
          return new SList(parts);
        });
      case "strip":
      case "lstrip":
      case "rstrip":
        return m((a) => {
          const chars = a[0] === undefined || a[0] === null ? " \t\n\r\v\f" : expectType(a[0], "string", "chars", isStr);
          let lo = 0;
          let hi = s.length;
          if (name !== "rstrip") while (lo < hi && chars.includes(s[lo]!)) lo++;
          if (name !== "lstrip") while (hi > lo && chars.includes(s[hi - 1]!)) hi--;
          return s.slice(lo, hi);
        });
      case "startswith":
      case "endswith":
        return m((a) => {
          const pre = a[0] instanceof STuple ? a[0].items : [a[0]!];
          return pre.some((p) => (name === "startswith" ? s.startsWith(expectType(p, "string", "prefix", isStr)) : s.endsWith(expectType(p, "string", "suffix", isStr))));
        });
      case "replace":
        return m((a) => s.split(expectType(a[0]!, "string", "old", isStr)).join(expectType(a[1]!, "string", "new", isStr)));
      case "lower":
        return m(() => s.toLowerCase());
      case "upper":
        return m(() => s.toUpperCase());
      case "find":
        return m((a) => s.indexOf(expectType(a[0]!, "string", "sub", isStr)));
      case "count":
        return m((a) => s.split(expectType(a[0]!, "string", "sub", isStr)).length - 1);
      case "splitlines":
        return m(() => new SList(s.split(/\r?\n/).filter((x, i, arr) => !(i === arr.length - 1 && x === ""))));
      case "format":
        return m((a, k) => {
          let auto = 0;
          return s.replace(/\{\{|\}\}|\{([^{}]*)\}/g, (whole, key: string | undefined) => {
            if (whole === "{{") return "{";
            if (whole === "}}") return "}";
            if (key === "" || key === undefined) return str(a[auto++] ?? null);
            if (/^\d+$/.test(key)) return str(a[Number(key)] ?? null);
            const kv = k.find(([n]) => n === key);
            if (kv === undefined) throw new Error(`Keyword argument \`${key}\` not found in format call`);
            return str(kv[1]);
          });
        });
    }
  }
  if (obj instanceof SList) {
    const l = obj;
    switch (name) {
      case "append":
        return m((a) => (l.items.push(a[0]!), null));
      case "extend":
        return m((a) => (l.items.push(...iterate(a[0]!)), null));
      case "insert":
        return m((a) => (l.items.splice(expectType(a[0]!, "int", "index", isInt), 0, a[1]!), null));
      case "pop":
        return m((a) => {
          const i = a.length ? normIndex(a[0]!, l.items.length) : l.items.length - 1;
          if (l.items.length === 0) throw new Error("pop from empty list");
          return l.items.splice(i, 1)[0]!;
        });
      case "remove":
        return m((a) => {
          const i = l.items.findIndex((x) => equals(x, a[0]!));
          if (i < 0) throw new Error(`list.remove: ${repr(a[0]!)} not in list`);
          l.items.splice(i, 1);
          return null;
        });
      case "index":
        return m((a) => {
          const i = l.items.findIndex((x) => equals(x, a[0]!));
          if (i < 0) throw new Error(`list.index: ${repr(a[0]!)} not in list`);
          return i;
        });
    }
  }
  if (obj instanceof SDict) {
    const d = obj;
    switch (name) {
      case "get":
        return m((a) => d.get(a[0]!) ?? a[1] ?? null);
      case "keys":
        return m(() => new SList([...d.map.values()].map(([k]) => k)));
      case "values":
        return m(() => new SList([...d.map.values()].map(([, v]) => v)));
      case "items":
        return m(() => new SList([...d.map.values()].map(([k, v]) => new STuple([k, v]))));
      case "update":
        return m((a, k) => {
          if (a[0] instanceof SDict) for (const [kk, v] of a[0].map.values()) d.set(kk, v);
          for (const [kk, v] of k) d.set(kk, v);
          return null;
        });
      case "pop":
        return m((a) => {
          const v = d.get(a[0]!);
          if (v === undefined) {
            if (a.length > 1) return a[1]!;
            throw new Error(`Key \`${repr(a[0]!)}\` not found`);
          }
          d.map.delete(hashKey(a[0]!));
          return v;
        });
      case "setdefault":
        return m((a) => {
          const v = d.get(a[0]!);
          if (v !== undefined) return v;
          d.set(a[0]!, a[1] ?? null);
          return a[1] ?? null;
        });
    }
  }
  throw new Error(`Object of type \`${typeName(obj)}\` has no attribute \`${name}\``);
}
