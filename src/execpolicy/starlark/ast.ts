/**
 * The syntax tree of a rules file, as built by parser.ts and walked by evaluator.ts. Every node carries a
 * {@link Span} so errors can point at the code.
 */
import type { Span } from "./diagnostics.ts";

/** Expression nodes. */
export type Expr =
  | { t: "lit"; value: string | number | bigint | boolean | null; float?: boolean; span: Span }
  | { t: "fstr"; parts: (string | Expr)[]; span: Span }
  | { t: "name"; name: string; span: Span }
  | { t: "list"; items: Expr[]; span: Span }
  | { t: "tuple"; items: Expr[]; span: Span }
  | { t: "dict"; entries: [Expr, Expr][]; span: Span }
  | { t: "listcomp"; elt: Expr; clauses: CompClause[]; span: Span }
  | { t: "dictcomp"; key: Expr; value: Expr; clauses: CompClause[]; span: Span }
  | { t: "call"; fn: Expr; args: Arg[]; span: Span }
  | { t: "index"; obj: Expr; index: Expr; span: Span }
  | { t: "slice"; obj: Expr; lo?: Expr; hi?: Expr; step?: Expr; span: Span }
  | { t: "attr"; obj: Expr; name: string; span: Span }
  | { t: "unary"; op: string; operand: Expr; span: Span }
  | { t: "binary"; op: string; left: Expr; right: Expr; span: Span }
  | { t: "cond"; test: Expr; then: Expr; else: Expr; span: Span }
  | { t: "lambda"; params: Param[]; body: Expr; span: Span };

/** `for x in xs` / `if cond` clauses of a comprehension. */
export type CompClause = { t: "for"; target: Expr; iter: Expr } | { t: "if"; cond: Expr };

/** Call argument. */
export type Arg =
  | { kind: "pos"; value: Expr }
  | { kind: "named"; name: string; value: Expr; span: Span }
  | { kind: "star"; value: Expr }
  | { kind: "starstar"; value: Expr };

/** Function parameter. */
export type Param = { kind: "normal"; name: string; default?: Expr } | { kind: "star"; name?: string } | { kind: "starstar"; name: string };

/** Statement nodes. */
export type Stmt =
  | { t: "expr"; expr: Expr; span: Span }
  | { t: "assign"; target: Expr; value: Expr; span: Span }
  | { t: "augassign"; op: string; target: Expr; value: Expr; span: Span }
  | { t: "def"; name: string; params: Param[]; body: Stmt[]; span: Span }
  | { t: "if"; test: Expr; body: Stmt[]; orelse: Stmt[]; span: Span }
  | { t: "for"; target: Expr; iter: Expr; body: Stmt[]; span: Span }
  | { t: "return"; value?: Expr; span: Span }
  | { t: "pass"; span: Span }
  | { t: "break"; span: Span }
  | { t: "continue"; span: Span }
  | { t: "load"; module: string; symbols: [string, string][]; span: Span };
