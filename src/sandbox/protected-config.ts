/**
 * The protected names and config folders (docs/sandbox.md, "Protected paths inside writable roots"): `.git`,
 * `.agents`, `.codex` at the top of every writable root, and the folders whose contents decide what later sessions
 * may do (`CODEX_HOME`, `/etc/codex`), kept read-only inside any writable root, never writable as a root.
 */
import { lstatSync } from "node:fs";
import { isAbsolute, join, normalize, sep } from "node:path";
import { canonicalMissing, isUnder, symlinksOnTheWay } from "./paths.ts";

/** Names kept read-only at the top of every writable root. */
export const PROTECTED_NAMES = [".git", ".agents", ".codex"] as const;

/** The system folder Codex and shellmcp read rules and config from (`/etc/codex`). */
export const SYSTEM_CONFIG_DIR = "/etc/codex";

/** Config folders no sandbox may write (see {@link setProtectedConfigDirs}); canonical forms are taken when used. */
let configDirs: readonly string[] = [SYSTEM_CONFIG_DIR];

/**
 * Declare the folders whose contents decide what later sessions may do — `CODEX_HOME` (rules, `config.toml`) and
 * `/etc/codex` — for this process: every plan made afterwards keeps them read-only inside any writable root
 * (docs/sandbox.md, "Protected paths inside writable roots"). `serve` calls it at start-up; the sandbox helper
 * from its `--protected-config-dir` flags. Paths must be absolute; `/etc/codex` is always included. Default:
 * `/etc/codex` only.
 */
export function setProtectedConfigDirs(dirs: readonly string[]): void {
  configDirs = [...new Set([SYSTEM_CONFIG_DIR, ...dirs.filter((d) => isAbsolute(d)).map((d) => normalize(d))])];
}

/** The folders set by {@link setProtectedConfigDirs} (absolute, as given; `/etc/codex` first). */
export function protectedConfigDirs(): readonly string[] {
  return configDirs;
}

/**
 * The paths to keep read-only inside the writable `root` (canonical) so that no protected config folder
 * ({@link protectedConfigDirs}) lying below it can be written: the folder itself when it exists, else its first
 * missing component below `root` (so that it cannot be created either: the bubblewrap backend mounts an empty
 * read-only folder there for the run). A folder that `root` itself lies in is not listed: see
 * {@link rootInConfigDir}. Empty when no protected folder lies below `root`.
 */
export function configCarveOuts(root: string): string[] {
  const out: string[] = [];
  for (const d of configDirs) {
    const c = canonicalMissing(d);
    if (c === root || !isUnder(c, root)) continue;
    let p = root;
    for (const part of c.slice(root.length + (root.endsWith(sep) ? 0 : 1)).split(sep)) {
      p = join(p, part);
      try {
        lstatSync(p);
      } catch {
        break; // the first missing component: blocking it blocks everything below
      }
    }
    out.push(p);
  }
  // A link on the way to a protected folder (`~/.codex -> elsewhere`) that lies in the root: the sandbox could
  // re-point it. Listed as it is (a link): bubblewrap then refuses the run ("crosses writable symlink"), since a
  // mount cannot cover a link; Landlock refuses it too ({@link configDirsUnder}).
  for (const d of configDirs) for (const link of symlinksOnTheWay(d)) if (link !== root && isUnder(link, root)) out.push(link);
  return [...new Set(out)];
}

/**
 * The protected config folders ({@link protectedConfigDirs}, as given) lying strictly below the writable `root`
 * (canonical), or reached through a symlink that lies below it.
 */
export function configDirsUnder(root: string): string[] {
  return configDirs.filter((d) => {
    const c = canonicalMissing(d);
    return (c !== root && isUnder(c, root)) || symlinksOnTheWay(d).some((l) => l !== root && isUnder(l, root));
  });
}

/** The protected config folder (canonical) that `root` (canonical) is or lies in, if any: such a root is never writable. */
export function rootInConfigDir(root: string): string | undefined {
  for (const d of configDirs) {
    const c = canonicalMissing(d);
    if (isUnder(root, c)) return c;
  }
  return undefined;
}
