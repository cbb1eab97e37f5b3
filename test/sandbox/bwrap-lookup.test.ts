/**
 * bubblewrap, which builds every sandbox from outside, is found only where the system keeps it (split from
 * extra.test.ts, issue 42): forced but missing fails closed, `auto` falls back to Landlock with a warning, and a
 * `bwrap` planted on `PATH` is never run.
 */
import { describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CONF_BASE } from "../helpers/cleanup.ts";
import { skipWithout } from "../helpers/prereq.ts";
import { box, bwrapMissing, run, WW } from "../helpers/sandbox-run.ts";

describe.skipIf(process.platform !== "linux")("bwrap lookup", () => {
  test("bwrap forced but not installed: fail closed; auto falls back to Landlock with a warning", () => {
    const b = box();
    const missing = { SHELLMCP_BWRAP: join(b.outside, "no-such-bwrap") }; // bwrap is looked up nowhere else then
    const forced = run("bwrap", WW, b.cwd, ["bash", "-c", "touch ran"], missing);
    expect(forced.code).toBe(101);
    expect(forced.err).toContain("bubblewrap is not installed");
    expect(existsSync(join(b.cwd, "ran"))).toBe(false);
    const auto = run("auto", WW, b.cwd, ["bash", "-c", `touch ran; echo x > ${b.outside}/o.txt`], missing);
    expect(auto.err).toContain("using Landlock instead");
    expect(existsSync(join(b.cwd, "ran"))).toBe(true);
    expect(existsSync(join(b.outside, "o.txt"))).toBe(false);
  });

  // bwrap runs outside every sandbox: a `bwrap` in a PATH folder (`~/.local/bin` under a writable HOME, the
  // workspace) would build the next sandboxes. Only the system's folders (or SHELLMCP_BWRAP) are searched.
  test.skipIf(skipWithout("the bwrap lookup test", bwrapMissing))("a bwrap on PATH is never run; the system's is", () => {
    const b = box();
    const planted = mkdtempSync(join(CONF_BASE, "path-"));
    writeFileSync(join(planted, "bwrap"), `#!/bin/sh\ntouch ${b.outside}/planted-bwrap-ran\nexit 1\n`, { mode: 0o755 });
    for (const backend of ["bwrap", "auto"]) {
      const r = run(backend, WW, b.cwd, ["bash", "-c", "echo ok"], { PATH: `${planted}:/usr/bin:/bin` });
      expect({ code: r.code, out: r.out }).toEqual({ code: 0, out: "ok\n" });
    }
    expect(existsSync(join(b.outside, "planted-bwrap-ran"))).toBe(false);
  });
});
