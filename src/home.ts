/**
 * This process's home folder, without depending on a passwd entry (issue 44: OpenShift's arbitrary uids and images
 * built from scratch run shellmcp as a uid that has none, often with HOME unset).
 *
 * Node's and Bun's `os.homedir()` read `$HOME`, then the passwd entry of the uid, and throw
 * `ENOENT … uv_os_homedir` when there is neither: every caller in shellmcp goes through {@link userHome} instead.
 */
import { homedir } from "node:os";
import { isAbsolute } from "node:path";

/**
 * This process's HOME (an absolute path; it need not exist): `$HOME` when it is absolute (as `os.homedir()` reads
 * it), else the passwd entry's home, else `/` — what container runtimes give a uid without a passwd entry (runc sets
 * `HOME=/` then), so CODEX_HOME defaults to `/.codex` and the credential stores to `/.ssh` …, which such a process
 * rarely has. Read at each call: Bun's `homedir()` keeps the value `$HOME` had at start, and tests that give the
 * process another HOME must see that one. Never throws.
 */
export function userHome(): string {
  const h = process.env.HOME;
  if (h !== undefined && isAbsolute(h)) return h;
  try {
    return homedir();
  } catch {
    return "/"; // no HOME and no passwd entry (ENOENT … uv_os_homedir)
  }
}
