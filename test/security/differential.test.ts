/**
 * Issue 38, "The boundary's model checked against the kernel" — the sampled subset of the differential tier
 * (./differential/harness.ts; the whole tier: `bun bench/differential.ts`, docs/development.md). For a few generated
 * layouts, a sample of paths × operations runs inside the real sandbox of a call — bubblewrap started directly as
 * `serve` does, Landlock at the kernel's ABI, and (as root) simulated ABIs 1, 2 and one between — and each outcome
 * must equal what the writable model (`CallSandbox.writable()` + `canWrite`) says for it, up to the named
 * stricter-kernel rules; a kernel that allows what the model denies fails unless listed in `KNOWN_GAPS`.
 *
 * The seed is printed; `DIFFERENTIAL_SEED=N` reproduces a run, `DIFFERENTIAL_SAMPLE=K` sets the probes per sandbox
 * start (default 30).
 */
import { describe, expect, test } from "bun:test";
import { ensureBinary } from "../helpers/binary.ts";
import { CONF_BASE } from "../helpers/test-dirs.ts";
import { skipWithout, toolMissing } from "../helpers/prereq.ts";
import { availableBackends, backendName, describe as describeOutcome, isFailure, runLayout, type Backend } from "./differential/harness.ts";
import { rng, type Probe } from "./differential/layout.ts";

const seed = Number(process.env.DIFFERENTIAL_SEED ?? Math.floor(Math.random() * 2 ** 31));
const sample = Number(process.env.DIFFERENTIAL_SAMPLE ?? 30);
const LAYOUTS = 4;
console.log(`differential tier (sampled): seed ${seed} — DIFFERENTIAL_SEED=${seed} reproduces it`);

const { bwrap, landlockAbi } = availableBackends();
const isRoot = process.getuid?.() === 0;

/** The backends of layout `i`: bubblewrap direct, Landlock native; as root ABI 1, 2 and one from 3 to native-1. */
function backendsFor(i: number): Backend[] {
  const out: Backend[] = [];
  if (bwrap !== undefined) out.push({ kind: "bwrap", via: i % 2 === 0 ? "direct" : "helper" });
  if (landlockAbi >= 1) out.push({ kind: "landlock", abi: landlockAbi });
  if (isRoot && landlockAbi >= 2) {
    out.push({ kind: "landlock", abi: 1 }, { kind: "landlock", abi: 2 });
    if (landlockAbi > 3) out.push({ kind: "landlock", abi: 3 + Math.floor(rng(seed + i)() * (landlockAbi - 3)) });
  }
  return out;
}

/** Paths where the model has something to say beyond "inside a root or not". */
const INTERESTING = /\.git|\.codex|\.agents|backup\.git|link|dangling|rodir|ro\.txt|codex-home/;

/** Probes drawn reproducibly: about 60% from the interesting paths, the rest from all others. */
function sampler(layoutSeed: number): (ps: Probe[], b: Backend) => Probe[] {
  return (ps, b) => {
    const r = rng(layoutSeed * 31 + backendName(b).length * 7 + (b.kind === "landlock" ? b.abi : 0));
    const hot = ps.filter((p) => INTERESTING.test(p.path));
    const cold = ps.filter((p) => !INTERESTING.test(p.path));
    const draw = (from: Probe[], k: number) => {
      const pool = [...from];
      const out: Probe[] = [];
      while (out.length < k && pool.length > 0) out.push(pool.splice(Math.floor(r() * pool.length), 1)[0]!);
      return out;
    };
    // bubblewrap twice as many: it is where the model has most to say (and a profile's Landlock call is refused).
    const n = b.kind === "bwrap" ? 2 * sample : sample;
    const h = draw(hot, Math.round(n * 0.6));
    return [...h, ...draw(cold, n - h.length)];
  };
}

describe.skipIf(
  skipWithout("differential tier", toolMissing("python3") ?? (landlockAbi < 1 && bwrap === undefined ? "no sandbox" : undefined)),
)("issue 38: the writable model equals what the kernel enforces", () => {
  ensureBinary();
  for (let i = 0; i < LAYOUTS; i++) {
    test(`layout ${seed + i}`, async () => {
      const runs = await runLayout(seed + i, backendsFor(i), sampler(seed + i), bwrap, CONF_BASE);
      const report: string[] = [];
      let probes = 0;
      for (const run of runs) {
        probes += run.outcomes.length;
        for (const o of run.outcomes) if (isFailure(o)) report.push(describeOutcome(o, run.layout.base));
        for (const c of run.changed) report.push(`${backendName(run.backend)} left the layout changed: ${c}`);
      }
      const gaps = new Map<string, number>();
      for (const run of runs)
        for (const o of run.outcomes) if (!o.model && o.kernel && o.rule !== undefined) gaps.set(o.rule, (gaps.get(o.rule) ?? 0) + 1);
      console.log(
        `layout ${seed + i}: ${probes} probes, ${runs.length} sandbox starts` +
          (gaps.size > 0 ? `; known gaps seen: ${[...gaps].map(([g, n]) => `${g} ×${n}`).join(", ")}` : ""),
      );
      if (report.length > 0) console.log(`layout ${seed + i} (${runs[0]!.layout.shape}):\n  ${report.join("\n  ")}`);
      expect(report).toEqual([]);
      expect(probes).toBeGreaterThan(0);
    }, 60_000);
  }
});
