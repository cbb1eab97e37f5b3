/**
 * The front end of the Starlark subset that Codex `.rules` files use (docs/execpolicy.md, "The language"): the
 * "Extended" dialect of starlark-rust with f-strings — `def`/`lambda`, top-level `if`/`for`, comprehensions.
 * This module gathers the pieces: diagnostics.ts (spans, StarlarkError, rendering), lexer.ts, ast.ts, parser.ts
 * (statements) and parse-expr.ts (expressions).
 */
export { lineCol, renderDiagnostic, StarlarkError, type SourceFile, type Span } from "./diagnostics.ts";
export type { Arg, CompClause, Expr, Param, Stmt } from "./ast.ts";
export { parseFile } from "./parser.ts";
