/**
 * Seatbelt in network proxy mode (issue 24): the policy for a workspace-write plan with the network enabled and the
 * proxy on loopback ports 3128 and 8081, without and with `allow_local_binding`, against reviewed files in
 * test/fixtures/seatbelt/ (regenerate with `UPDATE_GOLDEN=1`). The network section allows outbound connections to
 * those ports only (N05), plus N06 with `allow_local_binding`, never `(allow network-outbound)` (N01); every form
 * carries a rule id docs/seatbelt.md traces. Paths are canonicalised by an identity host (the plan's paths are
 * fixed strings, nothing is read from this machine).
 */
import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { FilesystemPlan } from "../../../src/sandbox/filesystem-plan.ts";
import { seatbeltLaunch, seatbeltPolicy } from "../../../src/sandbox/macos/seatbelt.ts";

const GOLDEN = join(import.meta.dir, "..", "..", "fixtures", "seatbelt");
const UPDATE = process.env.UPDATE_GOLDEN === "1";
const host = { canonicalize: (p: string) => p };
const plan: FilesystemPlan = {
  sandboxed: true,
  fullRead: true,
  fullWrite: false,
  readableRoots: [],
  includePlatformDefaults: false,
  writableRoots: [{ root: "/Users/dev/proj", readOnlySubpaths: ["/Users/dev/proj/.git", "/Users/dev/proj/.codex"] }],
  deniedPaths: [],
  network: "enabled",
  strict: false,
};

describe("Seatbelt policy in network proxy mode", () => {
  for (const [name, allowLocalBinding] of [
    ["proxy-workspace", false],
    ["proxy-workspace-local-binding", true],
  ] as const) {
    test(`${name}: outbound only to the proxy ports`, () => {
      const p = seatbeltPolicy(plan, { host, proxy: { ports: [3128, 8081], allowLocalBinding } });
      const file = join(GOLDEN, `${name}.sbpl`);
      if (UPDATE || !existsSync(file)) {
        if (!UPDATE) throw new Error(`missing golden file ${file} (run with UPDATE_GOLDEN=1 and review it)`);
        writeFileSync(file, p.text);
      }
      expect(p.text).toBe(readFileSync(file, "utf8"));
      expect(p.text).not.toContain("(allow network-outbound)\n");
      expect(p.text).toContain(
        '(allow network-outbound (remote ip "localhost:3128"))\n(allow network-outbound (remote ip "localhost:8081"))',
      );
      expect(p.text.includes('(allow network-bind (local ip "*:*"))')).toBe(allowLocalBinding);
      const doc = readFileSync(join(import.meta.dir, "..", "..", "..", "docs", "seatbelt.md"), "utf8");
      for (const id of p.text.matchAll(/^; \[([A-Z]\d\d)\] /gm)) expect(doc).toContain(`| [${id[1]}] |`);
    });
  }

  test("no usable port: no outbound rule at all (fail closed); a full-access plan stays sandboxed in proxy mode", () => {
    expect(seatbeltPolicy(plan, { host, proxy: { ports: [], allowLocalBinding: false } }).text).not.toContain("network-outbound");
    const open: FilesystemPlan = { ...plan, fullWrite: true, writableRoots: [] };
    expect(seatbeltLaunch(open, ["true"], { host }).sandboxed).toBe(false);
    const l = seatbeltLaunch(open, ["true"], { host, proxy: { ports: [3128], allowLocalBinding: false } });
    expect(l.sandboxed).toBe(true);
    expect(l.env.CODEX_SANDBOX_NETWORK_DISABLED).toBeUndefined();
  });
});
