/**
 * The rules evaluator's public face: values (values.ts), the evaluator (evaluator.ts), operators
 * (operators.ts) and the standard globals (builtins.ts). See docs/execpolicy.md, "The language".
 */
export { Evaluator } from "./evaluator.ts";
export { repr, SBuiltin, SList, typeName, type CallSite, type Value } from "./values.ts";
