/**
 * The one `PATH` walk for programs shellmcp starts by name itself (the sandbox helper's command, an exec-server
 * process): the first `dir/name` on `path` that is an executable regular file (symlinks followed), as `execvp`
 * would find it. An empty entry is the current folder; a name containing `/` is returned as is. The escalation
 * boundary walks `PATH` its own, stricter way on purpose (src/escalate/decision/program-identity.ts `lookPath`: absolute entries
 * only, the real path returned), because what it finds runs outside the sandbox.
 */
import { statSync } from "node:fs";
import { delimiter, join } from "node:path";

/** Path of the program `name` found on `path` (a `:`-separated list), or undefined when none is there. */
export function findExecutable(name: string, path: string): string | undefined {
  if (name.includes("/")) return name;
  for (const dir of path.split(delimiter)) {
    const p = join(dir === "" ? "." : dir, name);
    try {
      const st = statSync(p);
      if (st.isFile() && (st.mode & 0o111) !== 0) return p;
    } catch {
      // not here
    }
  }
  return undefined;
}
