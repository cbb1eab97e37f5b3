/**
 * Where rules come from (docs/execpolicy.md, "Where rules come from"), in load order:
 *   1. system  `/etc/codex/rules/*.rules`
 *   2. user    `$CODEX_HOME/rules/*.rules` (default `~/.codex`)
 *   3. project `<dir>/.codex/rules/*.rules` for each dir from the repository root (nearest ancestor of the
 *      working directory holding `.git`) down to the working directory — only for projects the user trusts
 *      (`[projects."<path>"] trust_level = "trusted"` in `$CODEX_HOME/config.toml`, as Codex): a repository
 *      must not be able to grant itself escalations
 *   4. files named with `--rules`
 * Each folder: non-recursive, extension exactly `.rules`, regular files only (symlinks skipped, like Codex),
 * sorted by byte order. Unlike Codex, nothing is dropped silently: an unreadable folder or a broken file is an
 * error that names it.
 */
import { existsSync, lstatSync, readdirSync, statSync } from "node:fs";
import { userHome } from "../self.ts";
import { dirname, join, resolve } from "node:path";
import { ShellmcpError } from "../errors.ts";
import { loadConfig } from "../config/config.ts";
import { PolicyBuilder, RulesError } from "./load.ts";
import type { Policy } from "./policy.ts";

/** Default system config folder. */
export const SYSTEM_CODEX_DIR = "/etc/codex";

/**
 * `$CODEX_HOME` if set and non-empty (it must exist, as Codex requires), else `~/.codex` (need not exist).
 * Throws `CONFIG` when `CODEX_HOME` points nowhere.
 */
export function resolveCodexHome(env: Record<string, string | undefined> = process.env): string {
  const v = env.CODEX_HOME;
  if (v !== undefined && v !== "") {
    if (!existsSync(v))
      throw new ShellmcpError("CONFIG", `CODEX_HOME points to ${JSON.stringify(v)}, but that path does not exist`, { codexHome: v });
    return resolve(v);
  }
  return join(userHome(), ".codex");
}

/** `*.rules` regular files directly in `<folder>/rules`, sorted; [] if there is no such folder. */
export function rulesFilesIn(folder: string): string[] {
  const dir = join(folder, "rules");
  let names: string[];
  try {
    if (!lstatSync(dir).isDirectory()) throw new RulesError("read", dir, "not a directory");
    names = readdirSync(dir);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return [];
    if (e instanceof RulesError) throw e;
    throw new RulesError("read", dir, `failed to read rules files from ${dir}: ${(e as Error).message}`);
  }
  return names
    .filter((n) => n.endsWith(".rules") && n !== ".rules")
    .map((n) => join(dir, n))
    .filter((p) => lstatSync(p).isFile())
    .sort((a, b) => (Buffer.from(a) < Buffer.from(b) ? -1 : Buffer.from(a) > Buffer.from(b) ? 1 : 0));
}

/** Directories from the repository root (nearest ancestor with `.git`) down to `cwd`; just `cwd` without one. */
export function projectDirs(cwd: string): string[] {
  const dirs: string[] = [];
  for (let d = resolve(cwd); ; d = dirname(d)) {
    dirs.unshift(d);
    if (existsSync(join(d, ".git"))) return dirs;
    if (dirname(d) === d) return [resolve(cwd)];
  }
}

/**
 * Project paths marked `trust_level = "trusted"` in the config: `config` when given (the server's parsed
 * `config.toml` with its `-c` overrides), else `$CODEX_HOME/config.toml` read now.
 */
export function trustedProjects(codexHome: string, config?: Record<string, unknown>): Set<string> {
  const cfg = config ?? loadConfig(codexHome);
  const projects = cfg.projects;
  if (typeof projects !== "object" || projects === null || Array.isArray(projects)) return new Set();
  return new Set(
    Object.entries(projects as Record<string, { trust_level?: unknown }>)
      .filter(([, v]) => v?.trust_level === "trusted")
      .map(([k]) => resolve(k)),
  );
}

/** Options of {@link discoverRulesFiles}. */
export interface DiscoveryOptions {
  codexHome: string;
  /** Working directory for project layers; omit for none. */
  cwd?: string;
  /** System folder (default `/etc/codex`). */
  systemDir?: string;
  /** Extra files (`--rules`), loaded last. */
  extraRules?: readonly string[];
  /** The already parsed config (with `-c` overrides); omit to read `$CODEX_HOME/config.toml`. */
  config?: Record<string, unknown>;
}

/** Every rules file to load, in order, with the layer each came from. */
export function discoverRulesFiles(o: DiscoveryOptions): { path: string; layer: "system" | "user" | "project" | "flag" }[] {
  const out: { path: string; layer: "system" | "user" | "project" | "flag" }[] = [];
  for (const p of rulesFilesIn(o.systemDir ?? SYSTEM_CODEX_DIR)) out.push({ path: p, layer: "system" });
  for (const p of rulesFilesIn(o.codexHome)) out.push({ path: p, layer: "user" });
  if (o.cwd !== undefined) {
    const trusted = trustedProjects(o.codexHome, o.config);
    const isTrusted = (d: string) => {
      for (let x = d; ; x = dirname(x)) {
        if (trusted.has(x)) return true;
        if (dirname(x) === x) return false;
      }
    };
    for (const d of projectDirs(o.cwd)) {
      const folder = join(d, ".codex");
      if (!existsSync(folder) || !statSync(folder).isDirectory()) continue;
      if (!isTrusted(d)) continue;
      for (const p of rulesFilesIn(folder)) out.push({ path: p, layer: "project" });
    }
  }
  for (const p of o.extraRules ?? []) out.push({ path: resolve(p), layer: "flag" });
  return out;
}

/** Discover and load every rules file into one policy. Throws {@link RulesError} naming the bad file. */
export function loadPolicy(o: DiscoveryOptions): { policy: Policy; files: string[] } {
  const files = discoverRulesFiles(o).map((f) => f.path);
  const b = new PolicyBuilder();
  for (const f of files) b.addFile(f);
  return { policy: b.policy, files };
}
