/**
 * Not a test: runs every containment scenario (./scenarios.ts) against shellmcp in the four configurations and
 * against the Rust reference 0.97 (Landlock: its published helper has no bubblewrap; Codex-style sandbox state), then
 * writes ./results.json and the table in docs/security.md (./table.ts). Usage, after `bun build.ts`:
 *
 *   bun test/security/containment/generate.ts [scenario id…]
 *
 * With scenario ids, only those run; the others keep what ./results.json recorded.
 *
 * Needs the dev dependencies `@openai/codex-shell-tool-mcp@0.97.0` and `@openai/codex-0.97`.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ensureBinary, ROOT } from "../../helpers/binary.ts";
import { SCENARIOS } from "./scenarios.ts";
import { BEGIN, END, renderTable, type Outcome, type Results } from "./table.ts";
import { COLUMNS, oursTarget, referenceTarget, type Backend, type ClientKind } from "./targets.ts";

ensureBinary();
const results: Results = {
  generated: new Date().toISOString().slice(0, 10),
  reference: "codex-exec-mcp-server 0.97.0 with Codex 0.97.0's sandbox helper",
  scenarios: {},
};

async function attempt(
  make: () => Promise<{ close(): Promise<void> } & Parameters<(typeof SCENARIOS)[number]["attack"]>[0]>,
  s: (typeof SCENARIOS)[number],
): Promise<[Outcome, string]> {
  let t;
  try {
    t = await make();
    const v = await s.attack(t);
    return [v.held ? "held" : "broken", v.detail];
  } catch (e) {
    return [`error: ${(e as Error).message.split("\n")[0]!.slice(0, 80)}`, ""];
  } finally {
    await t?.close().catch(() => undefined);
  }
}

// Scenario ids given on the command line: only those run, and the others keep their recorded results.
const only = process.argv.slice(2);
if (only.length > 0) {
  const before = JSON.parse(readFileSync(join(import.meta.dir, "results.json"), "utf8")) as Results;
  for (const [id, r] of Object.entries(before.scenarios)) if (!only.includes(id)) results.scenarios[id] = r;
  results.generated = `${before.generated}; ${only.length} scenario(s) on ${results.generated}`;
}

for (const s of SCENARIOS.filter((x) => only.length === 0 || only.includes(x.id))) {
  const ours: Record<string, Outcome> = {};
  for (const column of COLUMNS) {
    const [backend, client] = column.split("/") as [Backend, ClientKind];
    const [o, detail] = await attempt(() => oursTarget(s, backend, client), s);
    ours[column] = o;
    console.error(`${s.id} ${column}: ${o} ${detail}`);
  }
  const [ref, refDetail] = await attempt(() => referenceTarget(s), s);
  console.error(`${s.id} reference: ${ref} ${refDetail}`);
  results.scenarios[s.id] = { ours, reference: ref, referenceDetail: refDetail };
}

writeFileSync(join(import.meta.dir, "results.json"), JSON.stringify(results, null, 2) + "\n");
const docPath = join(ROOT, "docs", "security.md");
const doc = readFileSync(docPath, "utf8");
const a = doc.indexOf(BEGIN);
const b = doc.indexOf(END);
if (a < 0 || b < a) throw new Error(`docs/security.md has no containment markers`);
writeFileSync(docPath, doc.slice(0, a + BEGIN.length) + "\n\n" + renderTable(SCENARIOS, results) + "\n\n" + doc.slice(b));
Bun.spawnSync([
  join(ROOT, "node_modules", ".bin", "prettier"),
  "--write",
  "--log-level",
  "warn",
  docPath,
  join(import.meta.dir, "results.json"),
]);
console.log(renderTable(SCENARIOS, results));
process.exit(0);
