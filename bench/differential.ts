/**
 * The whole differential tier (issue 38; the sampled subset is test/security/differential.test.ts): every probe
 * of `DIFFERENTIAL_LAYOUTS` generated layouts (default 24) under bubblewrap (started directly, as `serve` does, and
 * through our helper), Landlock at every ABI from the kernel's down to 1 (lower ones simulated). Prints every disagreement between the writable model
 * and the kernel with the rule that accounts for it, counts per rule, and exits 1 on any unexplained one (or a
 * probe that left the layout changed).
 *
 *   node_modules/.bin/bun build.ts && node_modules/.bin/bun bench/differential.ts
 *   DIFFERENTIAL_SEED=1234 DIFFERENTIAL_LAYOUTS=5 node_modules/.bin/bun bench/differential.ts   # reproduce
 *   DIFFERENTIAL_VERBOSE=1 …                                                              # every accepted difference
 *
 * Needs root for the simulated ABIs below 6 (the Landlock helper then makes a pid namespace of its own).
 */
import { benchHome } from "./lib.ts";
import {
  availableBackends,
  backendName,
  describe,
  isFailure,
  KNOWN_GAPS,
  runLayout,
  STRICTER,
  type Backend,
} from "../test/security/differential/harness.ts";

const seed = Number(process.env.DIFFERENTIAL_SEED ?? Math.floor(Math.random() * 2 ** 31));
const count = Number(process.env.DIFFERENTIAL_LAYOUTS ?? 24);
const verbose = process.env.DIFFERENTIAL_VERBOSE === "1";
console.log(`differential tier: seed ${seed} (DIFFERENTIAL_SEED=${seed} reproduces), ${count} layouts`);

// Outside /tmp and $TMPDIR: no other server's sandbox or git guard works there (see runLayout).
const parent = benchHome("differential-");
const { bwrap, landlockAbi } = availableBackends();
const isRoot = process.getuid?.() === 0;
const backends: Backend[] = [];
if (bwrap !== undefined) backends.push({ kind: "bwrap", via: "direct" }, { kind: "bwrap", via: "helper" });
for (let abi = landlockAbi; abi >= 1; abi--) if (abi >= 6 || isRoot) backends.push({ kind: "landlock", abi });
console.log(`backends: ${backends.map(backendName).join(", ")}${isRoot ? "" : " (not root: simulated ABIs below 6 left out)"}`);

let probes = 0;
let failures = 0;
const perRule = new Map<string, number>();
const perBackendMs = new Map<string, number[]>();
for (let i = 0; i < count; i++) {
  const runs = await runLayout(seed + i, backends, (ps) => ps, bwrap, parent);
  console.log(`layout ${seed + i}: ${runs[0]!.layout.shape} — ${runs[0]!.outcomes.length} probes per backend`);
  for (const run of runs) {
    const name = backendName(run.backend);
    (perBackendMs.get(name) ?? perBackendMs.set(name, []).get(name)!).push(run.ms);
    probes += run.outcomes.length;
    for (const o of run.outcomes) {
      if (o.rule !== undefined) perRule.set(o.rule, (perRule.get(o.rule) ?? 0) + 1);
      if (isFailure(o)) {
        failures++;
        console.log(`  DISAGREE ${describe(o, run.layout.base)}`);
      } else if (verbose && o.model !== o.kernel) console.log(`  accepted ${describe(o, run.layout.base)}`);
    }
    for (const c of run.changed) {
      failures++;
      console.log(`  CHANGED by ${name}: ${c}`);
    }
  }
}
console.log(`\n${probes} probes, ${failures} unexplained disagreements`);
for (const r of [...STRICTER, ...KNOWN_GAPS]) {
  const n = perRule.get(r.name) ?? 0;
  console.log(
    `  ${KNOWN_GAPS.includes(r) ? "KNOWN GAP" : "stricter "} ${r.name}: ${n}${KNOWN_GAPS.includes(r) && n === 0 ? " (not seen: fixed? remove it from KNOWN_GAPS)" : ""}`,
  );
}
for (const [name, ms] of perBackendMs) {
  const total = ms.reduce((a, b) => a + b, 0);
  console.log(`  ${name}: ${(total / ms.length).toFixed(0)} ms per sandbox start with its probes (${ms.length} starts)`);
}
process.exit(failures > 0 ? 1 : 0);
