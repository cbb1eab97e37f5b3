/**
 * The standard Starlark globals available in rules files (`len`, `str`, `sorted`, `range`, …; no `print`, `json`
 * or `struct`, as in Codex) and the methods of strings, lists and dicts (`obj.name`).
 */
import { normIndex } from "./operators.ts";
import {
  checkInt,
  compare,
  equals,
  hashKey,
  iterate,
  MAX_STEPS,
  repr,
  SBuiltin,
  SDict,
  SFloat,
  SList,
  str,
  STuple,
  truthy,
  typeName,
  type Value,
} from "./values.ts";

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
  if (!ok(v))
    throw new Error(`Type of parameter \`${param}\` doesn't match, expected \`${want}\`, actual \`${typeName(v)} (repr: ${repr(v)})\``);
  return v;
}

const isStr = (v: Value): v is string => typeof v === "string";
const isInt = (v: Value): v is number => typeof v === "number";

/** The standard Starlark globals available in rules files (no `print`, `json`, `struct`, as in Codex). */
export function standardGlobals(): Record<string, Value> {
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
      const [start, stop, step] =
        a.length === 1 ? [0, a[0] as number, 1] : [a[0] as number, a[1] as number, (a[2] as number | undefined) ?? 1];
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
        if (!/^[+-]?[0-9a-zA-Z]+$/.test(t) || Number.isNaN(parseInt(t, base)))
          throw new Error(`${repr(v)} is not a valid number in base ${base}`);
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
export function attribute(obj: Value, name: string): Value {
  const m = (f: (a: Value[], k: [string, Value][]) => Value) => builtin(`${typeName(obj)}.${name}`, f);
  if (typeof obj === "string") {
    const s = obj;
    switch (name) {
      case "join":
        return m((a) =>
          iterate(a[0]!)
            .map((x) => expectType(x, "string", "element", isStr))
            .join(s),
        );
      case "split":
        return m((a) => {
          const sep = a[0] === undefined || a[0] === null ? undefined : expectType(a[0], "string", "sep", isStr);
          const parts =
            sep === undefined
              ? s
                  .trim()
                  .split(/\s+/)
                  .filter((x) => x !== "")
              : s.split(sep);
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
          return pre.some((p) =>
            name === "startswith"
              ? s.startsWith(expectType(p, "string", "prefix", isStr))
              : s.endsWith(expectType(p, "string", "suffix", isStr)),
          );
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
