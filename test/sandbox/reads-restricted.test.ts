/**
 * A restricted-read policy lets a sandboxed command read its readable roots and the system's folders only (split
 * from extra.test.ts, issue 42): through the compiled binary as `codex-linux-sandbox`, on both backends.
 */
import { describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { skipWithout } from "../helpers/prereq.ts";
import { box, bwrapMissing, run } from "../helpers/sandbox-run.ts";

for (const backend of ["landlock", "bwrap"] as const) {
  describe.skipIf(process.platform !== "linux" || (backend === "bwrap" && skipWithout("bwrap backend tests", bwrapMissing)))(
    `restricted reads (${backend})`,
    () => {
      test("restricted reads: readable roots and system folders only", () => {
        const b = box();
        writeFileSync(join(b.outside, "secret.txt"), "topsecret");
        writeFileSync(join(b.cwd, "mine.txt"), "mine");
        const policy = { type: "read-only", access: { type: "restricted", include_platform_defaults: true, readable_roots: [] } };
        const r = run(backend, policy, b.cwd, ["bash", "-c", `cat mine.txt; echo; cat ${b.outside}/secret.txt; echo "rc=$?"`]);
        expect(r.out).toContain("mine\n");
        expect(r.out).toContain("rc=1");
        expect(r.out).not.toContain("topsecret");
      });
    },
  );
}
