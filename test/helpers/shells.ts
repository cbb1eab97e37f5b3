/**
 * Helpers for tests that run the patched shells: where they are, where stock ones are, and how to read the
 * argv records that test/fixtures/log-wrapper.sh writes.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "./binary.ts";

/** The shells we patch. */
export type ShellName = "bash" | "zsh";

/**
 * Folder of the patched shells the tests run: on Linux the portable static ones that scripts/build-shells-static.sh
 * builds into `dist/shells-static/linux-<arch>/` (the same files the executable carries, so the tests, the
 * walkthrough and `serve` run one build of the shells); on macOS `dist/shells/`, where scripts/build-shells-macos.sh
 * builds them. `SHELLMCP_TEST_SHELLS_DIR` names another build (the ASan/UBSan one of scripts/build-sanitized.sh).
 */
export const PATCHED_SHELLS_DIR =
  process.env.SHELLMCP_TEST_SHELLS_DIR ??
  (process.platform === "linux" ? join(ROOT, "dist", "shells-static", `linux-${process.arch}`) : join(ROOT, "dist", "shells"));

/** Path of the patched shell `name` in {@link PATCHED_SHELLS_DIR}. */
export function patchedShell(name: ShellName): string {
  return join(PATCHED_SHELLS_DIR, name);
}

/** Path of Debian's stock shell of the same kind, or undefined when not installed. */
export function stockShell(name: ShellName): string | undefined {
  const p = name === "bash" ? "/bin/bash" : "/usr/bin/zsh";
  return existsSync(p) ? p : undefined;
}

/** Why the patched shells' suites must skip, or undefined when both are built. */
export function shellsMissing(): string | undefined {
  for (const s of ["bash", "zsh"] as const) {
    if (!existsSync(patchedShell(s)))
      return `patched ${s} not built (run ${process.platform === "linux" ? "scripts/build-shells-static.sh" : "scripts/build-shells-macos.sh"})`;
  }
  return undefined;
}

/** The stand-in wrapper that logs its argv. */
export const LOG_WRAPPER = join(ROOT, "test", "fixtures", "log-wrapper.sh");

/** Parse the records of log-wrapper.sh: one `Buffer[]` (the wrapper's argv[1..]) per intercepted exec. */
export function readWrapLog(path: string): Buffer[][] {
  if (!existsSync(path)) return [];
  const data = readFileSync(path);
  const fields: Buffer[] = [];
  let at = 0;
  while (at < data.length) {
    const end = data.indexOf(0, at);
    if (end < 0) throw new Error("truncated wrapper log");
    fields.push(data.subarray(at, end));
    at = end + 1;
  }
  const records: Buffer[][] = [];
  for (let i = 0; i < fields.length;) {
    const n = Number(fields[i]!.toString());
    records.push(fields.slice(i + 1, i + 1 + n));
    i += 1 + n;
  }
  return records;
}

/** Records as strings (lossy for non-UTF-8 bytes). */
export function readWrapLogText(path: string): string[][] {
  return readWrapLog(path).map((r) => r.map((b) => b.toString()));
}
