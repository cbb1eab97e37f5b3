/**
 * A small structural check of Kubernetes objects against a CRD's `openAPIV3Schema` (issue 44: test data only, no
 * JSON-schema library is a dependency of this project): `type`, `required`, `enum`, `pattern`, `minimum`/`maximum`,
 * `minLength`/`maxLength`, `minItems`/`maxItems`, `items`, `properties`, `additionalProperties`, `anyOf` and
 * `x-kubernetes-int-or-string`, and unknown fields refused unless `additionalProperties` or
 * `x-kubernetes-preserve-unknown-fields` allows them (the API server prunes them silently: a typo would vanish).
 * Not checked: CEL rules (`x-kubernetes-validations`), `format`, list-map key uniqueness — the API server's part.
 */

/** A (sub)schema of a CRD's openAPIV3Schema. */
export type Schema = Record<string, any>;

/**
 * The storage version's schema of each CRD in `texts` (YAML), by `group/version/Kind`
 * (e.g. `extensions.agents.x-k8s.io/v1beta1/SandboxTemplate`).
 */
export function crdSchemas(texts: readonly string[]): Map<string, Schema> {
  const out = new Map<string, Schema>();
  for (const t of texts) {
    const crd = Bun.YAML.parse(t) as Schema;
    for (const v of crd.spec.versions as Schema[])
      if (v.storage === true) out.set(`${crd.spec.group}/${v.name}/${crd.spec.names.kind}`, v.schema.openAPIV3Schema);
  }
  return out;
}

const typeOf = (v: unknown): string =>
  v === null ? "null" : Array.isArray(v) ? "array" : Number.isInteger(v) ? "integer" : typeof v === "number" ? "number" : typeof v;

/** Problems of `value` under `schema`, each `path: what` (empty when it validates). */
export function validate(schema: Schema, value: unknown, path = ""): string[] {
  const at = path === "" ? "(root)" : path;
  if (schema["x-kubernetes-int-or-string"] === true) {
    const t = typeOf(value);
    return t === "integer" || t === "string" ? [] : [`${at}: expected integer or string`];
  }
  if (Array.isArray(schema.anyOf) && !(schema.anyOf as Schema[]).some((s) => validate(s, value, path).length === 0))
    return [`${at}: matches none of anyOf`];
  const errs: string[] = [];
  const t = typeOf(value);
  if (schema.type !== undefined) {
    const ok = schema.type === t || (schema.type === "number" && t === "integer");
    if (!ok) return [`${at}: expected ${schema.type}`];
  }
  if (Array.isArray(schema.enum) && !schema.enum.includes(value))
    errs.push(`${at}: ${JSON.stringify(value)} is not one of ${JSON.stringify(schema.enum)}`);
  if (t === "string") {
    const s = value as string;
    if (schema.pattern !== undefined && !new RegExp(schema.pattern as string, "u").test(s))
      errs.push(`${at}: does not match ${schema.pattern}`);
    if (schema.maxLength !== undefined && s.length > schema.maxLength) errs.push(`${at}: longer than ${schema.maxLength}`);
    if (schema.minLength !== undefined && s.length < schema.minLength) errs.push(`${at}: shorter than ${schema.minLength}`);
  }
  if (t === "integer" || t === "number") {
    const n = value as number;
    if (schema.minimum !== undefined && n < schema.minimum) errs.push(`${at}: below ${schema.minimum}`);
    if (schema.maximum !== undefined && n > schema.maximum) errs.push(`${at}: above ${schema.maximum}`);
  }
  if (t === "array") {
    const a = value as unknown[];
    if (schema.maxItems !== undefined && a.length > schema.maxItems) errs.push(`${at}: more than ${schema.maxItems} items`);
    if (schema.minItems !== undefined && a.length < schema.minItems) errs.push(`${at}: fewer than ${schema.minItems} items`);
    if (schema.items !== undefined) a.forEach((v, i) => errs.push(...validate(schema.items as Schema, v, `${path}[${i}]`)));
  }
  if (t === "object") {
    const o = value as Record<string, unknown>;
    const props = (schema.properties ?? {}) as Record<string, Schema>;
    for (const r of (schema.required ?? []) as string[]) if (!(r in o)) errs.push(`${path === "" ? r : `${path}.${r}`}: required`);
    for (const [k, v] of Object.entries(o)) {
      const p = path === "" ? k : `${path}.${k}`;
      if (k in props) errs.push(...validate(props[k]!, v, p));
      else if (typeof schema.additionalProperties === "object") errs.push(...validate(schema.additionalProperties as Schema, v, p));
      else if (schema.additionalProperties === true || schema["x-kubernetes-preserve-unknown-fields"] === true) continue;
      else if (schema.properties !== undefined || schema.additionalProperties === false) errs.push(`${p}: unknown field`);
    }
  }
  return errs;
}
