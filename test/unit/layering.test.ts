/**
 * Layering as a checked contract (issue 33): the folders of `src/` (and `ffi/`, `build.ts`, `scripts/`) import
 * each other in one direction only, the one docs/architecture.md ("Layering") draws. Every import of a module in
 * another unit must point to a lower layer; the imports that do not yet are listed in {@link EXCEPTIONS}, each with
 * the reason and the refactor that removes it, so that a new one fails here. A listed exception that no longer
 * occurs fails too (strike it from the list). The folder graph, exceptions left out, must have no cycle. The
 * layers themselves are the documented ones: {@link LAYERS} must equal the table in docs/architecture.md,
 * "Layering" (a layer added, moved or renamed in one place only fails). Some imports the layers allow are forbidden
 * still ({@link FORBIDDEN}, issue 42): the one command run is platform-neutral and names no platform's folder.
 *
 * Pure: reads the source files as text, runs nothing.
 */
import { describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, normalize } from "node:path";

const ROOT = join(import.meta.dir, "..", "..");

/**
 * The layers, top to bottom (docs/architecture.md, "Layering"). A unit is a folder or a single file, relative to
 * the repository root; a file belongs to the longest unit that contains it. A module may import its own unit and
 * any unit of a lower layer; nothing else (units of one layer do not import each other).
 */
const LAYERS: readonly (readonly string[])[] = [
  ["scripts"], // release.ts builds on build.ts
  ["build.ts"],
  ["src/main.ts"], // arg0 dispatch: loads each role lazily
  ["src/cli.ts"], // the shellmcp CLI: the program, assembled from its commands
  ["src/cli"], // one module per command: its flags, help texts, the lazy import of its implementation
  ["src/fs-helper"], // the codex-fs role: the exec-server's fs operations
  ["src/serve.ts"], // `serve` as a list of steps
  ["src/http"], // `serve --listen`: the HTTP front (listener, auth, limits) over one client runtime per session
  ["src/serve", "src/exec-server", "src/sandbox-cli", "src/init"], // the commands
  ["src/mcp"], // the only folder that knows MCP
  ["src/approvals"], // the local approver (`shellmcp approvals`, serve --approver): knows no MCP
  ["src/auth"], // authentication of HTTP and websocket clients (serve --listen, exec-server): knows no MCP
  ["src/shell"], // one command run: spawn, output, sessions, lifeline, the carried shells
  ["src/blocked"], // what a call had refused: the report, the remedies, the kernel's refusals read from output
  ["src/escalate/server.ts"], // the escalation server: each intercepted exec → decision → placement → answer
  ["src/escalate/placement.ts"], // where an escalated exec runs: the boundary's checks, git taint, a room or the host
  ["src/escalate/decision", "src/escalate/worker"], // what an exec may do; the poll(2) worker that places it
  ["src/escalate/rooms"], // the escalation room: plan, build, keep, check
  ["src/escalate/protocol"], // the wire, its sockets, the wrapper role
  ["src/sandbox/host-platform.ts"], // this process's LaunchPlatform: the one module naming linux/ and macos/ for src/shell
  ["src/sandbox/linux", "src/sandbox/macos"], // the backends
  ["src/sandbox"], // policy, filesystem plan, rooms' plan, git layout, git guard
  ["src/network"], // proxy policy, proxy, bridge
  ["src/execpolicy"], // .rules: the Starlark subset, matching, discovery
  ["src/config"], // config.toml, -c, shell_environment_policy
  ["src/carried"], // the patched shells and the room launcher the executable carries, and their checked copy
  [
    "src/log.ts",
    "src/self.ts",
    "src/escalation-socket.ts",
    "src/fault-injection.ts",
    "src/untrusted-fs.ts",
    "src/version.ts",
    "src/find-executable.ts",
    "src/trace-steps.ts",
    "src/jsonrpc.ts",
  ],
  ["src/safe-text.ts", "src/stderr.ts"],
  ["ffi"], // libc bindings and struct layouts
  ["src/errors.ts"], // the one error class: imports nothing
];

/**
 * Imports against the direction that remain until the big refactors of issue 33 (the call's sandbox as one object,
 * runCommand as plan → acquire → run → settle, escalation split into protocol, decision and placement). Each is
 * `from → to` (files), with why it is there and what removes it.
 */
const EXCEPTIONS: readonly { from: string; to: string; reason: string }[] = [];

/**
 * Imports the layers allow but the design does not (issue 42, "seams in the wrong place"): `from` (a unit) imports
 * no module of the units `to`, whatever their layer, with why. No exceptions: a module that needs one of them
 * reaches it through the interface the reason names.
 */
const FORBIDDEN: readonly { from: string; to: readonly string[]; reason: string }[] = [
  {
    from: "src/shell",
    to: ["src/sandbox/linux", "src/sandbox/macos"],
    reason:
      "the one command run is platform-neutral: the lifeline guard, the backends and the git guard's repairs come " +
      "from src/sandbox/platform.ts's LaunchPlatform (src/sandbox/host-platform.ts)",
  },
];

/** The edges among `edges` that {@link FORBIDDEN} forbids, as `from imports to (reason)` lines. */
function forbiddenEdges(edges: readonly Edge[]): string[] {
  return edges.flatMap((e) =>
    FORBIDDEN.filter((f) => f.from === e.fromUnit && f.to.includes(e.toUnit)).map((f) => `${e.from} imports ${e.to}: ${f.reason}`),
  );
}

/** Repository-relative paths of the `.ts` files under `dir` (recursively). */
function tsFiles(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const name of readdirSync(join(ROOT, d))) {
      const p = join(d, name);
      if (statSync(join(ROOT, p)).isDirectory()) walk(p);
      else if (p.endsWith(".ts") && !p.endsWith(".d.ts")) out.push(p);
    }
  };
  walk(dir);
  return out;
}

/**
 * The module specifiers `source` imports: static `import … from`, `export … from`, side-effect `import "x"` and
 * dynamic `import("x")` (type-only imports included: they are dependencies of the design too). Comment lines are
 * skipped, so a docstring that shows an import is not one.
 */
function importsOf(source: string): string[] {
  const code = source
    .replace(/\/\*[\s\S]*?\*\//g, (c) => c.replace(/[^\n]/g, " "))
    .split("\n")
    .filter((l) => !/^\s*\/\//.test(l))
    .join("\n");
  const out: string[] = [];
  const patterns = [
    /^\s*(?:import|export)\s[^"';]*?\sfrom\s*["']([^"']+)["']/gm,
    /^\s*import\s*["']([^"']+)["']/gm,
    /\bimport\(\s*["']([^"']+)["']\s*\)/g,
  ];
  for (const re of patterns) for (const m of code.matchAll(re)) out.push(m[1]!);
  return out;
}

/** The unit (a LAYERS entry) of repository-relative `file`, or undefined when none contains it. */
function unitOf(file: string, layers: readonly (readonly string[])[]): string | undefined {
  let best: string | undefined;
  for (const u of layers.flat()) {
    if ((file === u || file.startsWith(u + "/")) && (best === undefined || u.length > best.length)) best = u;
  }
  return best;
}

/** One cross-unit import edge: the importing file, the imported file, and their units. */
interface Edge {
  from: string;
  to: string;
  fromUnit: string;
  toUnit: string;
}

/** Every import between two different units among `files` (path → source); relative specifiers to `.ts` files only. */
function crossUnitEdges(files: ReadonlyMap<string, string>, layers: readonly (readonly string[])[]): Edge[] {
  const edges: Edge[] = [];
  for (const [from, source] of files) {
    const fromUnit = unitOf(from, layers);
    if (fromUnit === undefined) continue;
    for (const spec of importsOf(source)) {
      if (!spec.startsWith(".") || !spec.endsWith(".ts")) continue;
      const to = normalize(join(dirname(from), spec));
      const toUnit = unitOf(to, layers);
      if (toUnit === undefined || toUnit === fromUnit) continue;
      edges.push({ from, to, fromUnit, toUnit });
    }
  }
  return edges;
}

/** The edges that go against the layers (to the same or a higher layer). */
function againstDirection(edges: readonly Edge[], layers: readonly (readonly string[])[]): Edge[] {
  const rank = (u: string) => layers.findIndex((l) => l.includes(u));
  return edges.filter((e) => rank(e.toUnit) <= rank(e.fromUnit));
}

/** A cycle in the unit graph of `edges` (as a list of units, first = last), or undefined when there is none. */
function unitCycle(edges: readonly Edge[]): string[] | undefined {
  const next = new Map<string, Set<string>>();
  for (const e of edges) (next.get(e.fromUnit) ?? next.set(e.fromUnit, new Set()).get(e.fromUnit)!).add(e.toUnit);
  const state = new Map<string, "open" | "done">();
  const stack: string[] = [];
  const visit = (u: string): string[] | undefined => {
    state.set(u, "open");
    stack.push(u);
    for (const v of next.get(u) ?? []) {
      if (state.get(v) === "open") return [...stack.slice(stack.indexOf(v)), v];
      if (state.get(v) === undefined) {
        const c = visit(v);
        if (c !== undefined) return c;
      }
    }
    stack.pop();
    state.set(u, "done");
    return undefined;
  };
  for (const u of next.keys()) {
    if (state.get(u) === undefined) {
      const c = visit(u);
      if (c !== undefined) return c;
    }
  }
  return undefined;
}

const isException = (e: Edge) => EXCEPTIONS.some((x) => x.from === e.from && x.to === e.to);

/**
 * The layers docs/architecture.md's "Layering" table draws, top to bottom: each row's first cell names units in
 * backticks (a trailing `/` marks a folder); units separated by ", then " are successive layers, by ", " one layer.
 */
function documentedLayers(markdown: string): string[][] {
  const rows = markdown.slice(markdown.indexOf("| layer (top to bottom)")).split("\n").slice(2);
  const out: string[][] = [];
  for (const row of rows) {
    if (!row.startsWith("|")) break;
    for (const part of row.split("|")[1]!.split(", then ")) out.push([...part.matchAll(/`([^`]+)`/g)].map((m) => m[1]!.replace(/\/$/, "")));
  }
  return out;
}

/** The repository's modules: src/, ffi/, scripts/*.ts and build.ts, path → source. */
function repositoryModules(): Map<string, string> {
  const files = new Map<string, string>();
  for (const f of [...tsFiles("src"), ...tsFiles("ffi"), ...tsFiles("scripts"), "build.ts"]) {
    files.set(f, readFileSync(join(ROOT, f), "utf8"));
  }
  return files;
}

describe('layering (docs/architecture.md, "Layering")', () => {
  const files = repositoryModules();
  const edges = crossUnitEdges(files, LAYERS);

  test("every unit of the contract exists, and every module belongs to one", () => {
    expect(LAYERS.flat().filter((u) => !existsSync(join(ROOT, u)))).toEqual([]);
    expect([...files.keys()].filter((f) => unitOf(f, LAYERS) === undefined)).toEqual([]);
  });

  test("every import points down the layers, except the listed exceptions", () => {
    const bad = againstDirection(edges, LAYERS)
      .filter((e) => !isException(e))
      .map((e) => `${e.from} imports ${e.to} (${e.fromUnit} → ${e.toUnit}, against docs/architecture.md's direction)`);
    expect(bad).toEqual([]);
  });

  test("the contract is the one docs/architecture.md documents: its Layering table lists these layers, in this order", () => {
    const doc = documentedLayers(readFileSync(join(ROOT, "docs", "architecture.md"), "utf8"));
    expect(doc).toEqual(LAYERS.map((l) => [...l]));
  });

  test("no forbidden import: src/shell names no platform folder (src/sandbox/linux, src/sandbox/macos)", () => {
    expect(forbiddenEdges(edges)).toEqual([]);
  });

  test("the forbidden imports are caught: a planted src/shell module importing a platform folder fails", () => {
    expect(FORBIDDEN.flatMap((f) => [f.from, ...f.to]).filter((u) => !LAYERS.flat().includes(u))).toEqual([]);
    const planted = new Map(files);
    planted.set("src/shell/planted.ts", 'import { GUARD_END_SIGNAL } from "../sandbox/linux/lifeline.ts";\n');
    planted.set("src/shell/planted-mac.ts", 'import type { SeatbeltBackend } from "../sandbox/macos/backend.ts";\n');
    expect(forbiddenEdges(crossUnitEdges(planted, LAYERS)).map((l) => l.split(":")[0])).toEqual([
      "src/shell/planted.ts imports src/sandbox/linux/lifeline.ts",
      "src/shell/planted-mac.ts imports src/sandbox/macos/backend.ts",
    ]);
  });

  test("every listed exception still occurs (strike the ones a refactor removed)", () => {
    const stale = EXCEPTIONS.filter((x) => !againstDirection(edges, LAYERS).some((e) => e.from === x.from && e.to === x.to));
    expect(stale.map((x) => `${x.from} → ${x.to}`)).toEqual([]);
  });

  test("no cycle between folders once the exceptions are left out", () => {
    expect(unitCycle(edges.filter((e) => !isException(e)))).toBeUndefined();
  });

  test("the checks catch a planted violation: an upward import and the cycle it closes", () => {
    const planted = new Map(files);
    planted.set("src/config/planted.ts", 'import { startServe } from "../mcp/server.ts";\n');
    planted.set("src/mcp/planted.ts", 'export { x } from "../config/planted.ts";\n');
    const e = crossUnitEdges(planted, LAYERS);
    expect(againstDirection(e, LAYERS).filter((x) => !isException(x))).toEqual([
      { from: "src/config/planted.ts", to: "src/mcp/server.ts", fromUnit: "src/config", toUnit: "src/mcp" },
    ]);
    expect(unitCycle(e.filter((x) => !isException(x)))).toBeDefined();
  });

  test("the escalation folders are checked against each other: the wire below the rooms, decision and worker apart", () => {
    const planted = new Map(files);
    planted.set("src/escalate/protocol/planted.ts", 'import type { EscalateSpawn } from "../rooms/keep.ts";\n');
    planted.set("src/escalate/rooms/planted.ts", 'import { checkEscalation } from "../decision/boundary.ts";\n');
    planted.set("src/escalate/decision/planted.ts", 'import { SessionTable } from "../worker/sessions.ts";\n');
    const bad = againstDirection(crossUnitEdges(planted, LAYERS), LAYERS).filter((x) => !isException(x));
    expect(bad.map((x) => `${x.fromUnit} → ${x.toUnit}`).sort()).toEqual([
      "src/escalate/decision → src/escalate/worker",
      "src/escalate/protocol → src/escalate/rooms",
      "src/escalate/rooms → src/escalate/decision",
    ]);
  });

  test("importsOf reads static, re-export, side-effect and dynamic imports, and skips comments", () => {
    const src = [
      'import { a } from "./a.ts";',
      "import {",
      "  b,",
      '} from "./b.ts";',
      'import type { C } from "./c.ts";',
      'export { d } from "./d.ts";',
      'import "./e.ts";',
      'const f = await import("./f.ts");',
      '// import { g } from "./g.ts";',
      '/** import("./h.ts") */',
    ].join("\n");
    expect(importsOf(src).sort()).toEqual(["./a.ts", "./b.ts", "./c.ts", "./d.ts", "./e.ts", "./f.ts"]);
  });
});
