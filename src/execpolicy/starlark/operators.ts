/**
 * Indexing, slicing and the binary operators of the rules evaluator (arithmetic, comparison, membership,
 * concatenation, `%` formatting), with starlark-rust's error wording.
 */
import { checkInt, compare, equals, repr, SDict, SFloat, SList, str, STuple, typeName, type Value } from "./values.ts";

/** Normalise a possibly negative index against `len`; throws when out of range or not an int. */
export function normIndex(i: Value, len: number): number {
  if (typeof i !== "number") throw new Error(`Indices must be integers, not ${typeName(i)}`);
  const j = i < 0 ? i + len : i;
  if (j < 0 || j >= len) throw new Error(`Index \`${i}\` is out of bound`);
  return j;
}

/** `obj[idx]` for strings, lists, tuples and dicts. */
export function indexValue(obj: Value, idx: Value): Value {
  if (obj instanceof SList || obj instanceof STuple) return obj.items[normIndex(idx, obj.items.length)]!;
  if (typeof obj === "string") return obj[normIndex(idx, obj.length)]!;
  if (obj instanceof SDict) {
    const v = obj.get(idx);
    if (v === undefined) throw new Error(`Key \`${repr(idx)}\` not found`);
    return v;
  }
  throw new Error(`Object of type \`${typeName(obj)}\` is not subscriptable`);
}

/** `obj[lo:hi:step]` for strings, lists and tuples (None bounds mean the ends). */
export function sliceValue(obj: Value, lo: Value, hi: Value, step: Value): Value {
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
export function binaryOp(op: string, l: Value, r: Value): Value {
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

/** `fmt % arg`: %s, %r, %d and %% as Starlark supports them. */
export function percentFormat(fmt: string, arg: Value): string {
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
