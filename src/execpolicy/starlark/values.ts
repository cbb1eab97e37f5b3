/**
 * Starlark values as the rules evaluator represents them: string, int (JS safe integers), float ({@link SFloat}),
 * bool, None (`null`), list ({@link SList}), tuple ({@link STuple}), dict ({@link SDict}, insertion-ordered),
 * functions (`def`/`lambda`) and builtins; scopes; and the generic operations on values (type names, repr/str,
 * truthiness, equality, ordering, hashing, iteration) with starlark-rust's error wording.
 */
import type { Expr, Param, SourceFile, Span, Stmt } from "./syntax.ts";

/** Maximum loop iterations per file, against accidental infinite work (Starlark has no `while`, but `range` can be huge). */
export const MAX_STEPS = 10_000_000;

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

/** Canonical string of a hashable value, the key of SDict's map. Throws for unhashable values. */
export function hashKey(k: Value): string {
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

/** Starlark `==` (ints and floats compare by value; lists/tuples/dicts deeply). */
export function equals(a: Value, b: Value): boolean {
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

/** Starlark ordering for `<` and `sorted`: -1, 0 or 1 (numbers, strings, bools, lists/tuples); throws otherwise. */
export function compare(a: Value, b: Value): number {
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

/** The items a `for` loop visits: list/tuple items, dict keys; throws for other types. */
export function iterate(v: Value): Value[] {
  if (v instanceof SList || v instanceof STuple) return [...v.items];
  if (v instanceof SDict) return [...v.map.values()].map(([k]) => k);
  throw new Error(`Operation \`iter\` not supported on type \`${typeName(v)}\``);
}

/** `n` when it is a safe integer, else throws `Integer overflow` (ints are JS safe integers). */
export function checkInt(n: number): number {
  if (!Number.isSafeInteger(n)) throw new Error("Integer overflow");
  return n;
}
