/**
 * What no sandbox reads (issue 39): one list of the user's credential stores and one of secrets, hidden from every
 * sandbox shellmcp builds — the call's own (bubblewrap, Landlock, Seatbelt) and every escalation room — by default.
 *
 * - **Credential stores** ({@link CREDENTIAL_STORES}, relative to HOME: `~/.ssh`, `~/.aws`, `~/.npmrc` …): hidden
 *   unless the user opens one knowingly — for every sandbox with `[shellmcp] sandbox_readable = ["~/.npmrc"]`, or
 *   for one program's room with `[shellmcp.room_readable]` (`git = ["~/.ssh"]`).
 * - **Secrets**, never opened by any setting: CODEX_HOME's credentials ({@link CODEX_HOME_SECRET_FILES}, and every
 *   file at its top whose name says token, secret or credential, {@link isSecretName}), the approver's folder, the
 *   exec-server's `--ws-token-file`/`--ws-shared-secret-file`/`--ws-token-out` files, and the paths the user names
 *   in `[shellmcp] secret_paths`.
 *
 * A store or secret that is a symlink is hidden where it points (the canonical path: the link then leads into the
 * hidden place); one that does not exist is not listed. Codex's own sandbox hides none of them (it reads the whole
 * disk): docs/differences.md.
 *
 * Each process sets what it knows ({@link setHiding}: `serve` at start-up, the exec-server from its flags, the
 * sandbox helper from `--hidden-paths`), and the planning of every filesystem plan asks {@link hiddenPaths}
 * (./filesystem-plan.ts), so the backends enforce them through the plan's denied paths: bubblewrap mounts an empty,
 * unreadable folder or file over each; Landlock's read and write rules name everything beside them
 * ({@link pathsBeside}); Seatbelt denies them.
 */
import { existsSync, lstatSync, readdirSync } from "node:fs";
import { userHome } from "../self.ts";
import { dirname, isAbsolute, join } from "node:path";
import { isUnder } from "./paths.ts";
import { protectedConfigDirs } from "./protected-config.ts";
import { canonicalPath } from "./writable.ts";

/**
 * The user's credential stores, relative to HOME: one list, one place (docs/sandbox.md, "Credential stores and
 * secrets"). Every sandbox's read view excludes each one that exists unless opened (see the module comment).
 * Folders are hidden whole; files (`.netrc`, `.npmrc`, `.docker/config.json` …) one by one.
 */
export const CREDENTIAL_STORES: readonly string[] = [
  ".ssh",
  ".gnupg",
  ".aws",
  ".azure",
  ".kube",
  ".config/gcloud",
  ".config/gh",
  ".config/hub",
  ".config/git/credentials",
  ".git-credentials",
  ".netrc",
  ".npmrc",
  ".yarnrc.yml",
  ".pypirc",
  ".gem/credentials",
  ".cargo/credentials",
  ".cargo/credentials.toml",
  ".docker/config.json",
  ".terraform.d/credentials.tfrc.json",
  ".vault-token",
  ".password-store",
  ".local/share/keyrings",
  ".mozilla",
  ".config/google-chrome",
  ".config/chromium",
  ".config/BraveSoftware",
  ".config/microsoft-edge",
  "snap/firefox",
];

/**
 * Files of CODEX_HOME that hold credentials: Codex's `auth.json` (the user's OpenAI credentials), `.credentials.json`
 * (MCP servers' OAuth tokens when no keyring is there), `environments.toml` (exec-server URLs with
 * `auth_bearer_token`), and `approvals` (the approver's folder when `XDG_RUNTIME_DIR` does not qualify).
 */
export const CODEX_HOME_SECRET_FILES: readonly string[] = ["auth.json", ".credentials.json", "environments.toml", "approvals"];

/** Whether a file at the top of CODEX_HOME is a secret by its name (`exec-server.token`, `ws-secret`, …). */
export function isSecretName(name: string): boolean {
  return /token|secret|credential|\.key$|\.pem$/i.test(name);
}

/** What one plan hides: credential stores (openable) and secrets (never), canonical absolute paths that exist. */
export interface HiddenPaths {
  stores: string[];
  secrets: string[];
}

/** This process's settings (see {@link setHiding}). */
interface Hiding {
  /** More secrets: absolute paths (token files, the approver's folder, `[shellmcp] secret_paths`). */
  secrets: readonly string[];
  /** Credential stores opened for every sandbox (`[shellmcp] sandbox_readable`), absolute. */
  open: readonly string[];
  /** The sandbox helper: exactly these (`--hidden-paths`), nothing computed. */
  fixed?: HiddenPaths;
}

let hiding: Hiding = { secrets: [], open: [] };

/**
 * Declare this process's secrets and opened stores (replacing earlier settings): `secrets` (absolute paths; more
 * are added with each call's {@link hiddenPaths}), `open` (stores under these paths stay readable), or `fixed`: the
 * exact list to hide, for the sandbox helper, whose caller computed it. Relative paths are ignored.
 */
export function setHiding(o: { secrets?: readonly string[]; open?: readonly string[]; fixed?: HiddenPaths }): void {
  hiding = {
    secrets: (o.secrets ?? []).filter((p) => isAbsolute(p)),
    open: (o.open ?? []).filter((p) => isAbsolute(p)),
    ...(o.fixed !== undefined ? { fixed: o.fixed } : {}),
  };
}

/** Add more secrets to this process's settings (the exec-server's token files, the approver's folder). */
export function addSecrets(paths: readonly string[]): void {
  hiding = { ...hiding, secrets: [...hiding.secrets, ...paths.filter((p) => isAbsolute(p))] };
}

/**
 * The credential stores of `home` that exist (canonical paths: a store that is a symlink is hidden where it
 * points), minus those under a path of `granted` (absolute). Reads the filesystem (lstat/realpath) only.
 */
export function credentialStores(home: string, granted: readonly string[] = []): string[] {
  const out = new Set<string>();
  const grants = granted.map((g) => canonicalPath(g));
  for (const rel of CREDENTIAL_STORES) {
    const p = join(home, rel);
    if (!existsSync(p)) continue;
    const c = canonicalPath(p);
    if (grants.some((g) => isUnder(c, g) || isUnder(p, g))) continue;
    out.add(c);
  }
  return [...out];
}

/** The CODEX_HOME folders to search: `$CODEX_HOME`, `~/.codex`, and the protected config folders but `/etc/codex`. */
function codexHomes(home: string): string[] {
  const env = process.env.CODEX_HOME;
  const dirs = [join(home, ".codex"), ...(env !== undefined && isAbsolute(env) ? [env] : []), ...protectedConfigDirs()];
  return [...new Set(dirs.filter((d) => d !== "/etc/codex"))];
}

/** This process's HOME, never throwing (../home.ts: `$HOME`, the passwd entry's, else `/`). */
export { userHome };

/**
 * The secrets that exist now (canonical paths): CODEX_HOME's credential files and secret-named files, and this
 * process's declared secrets (a secret that is a symlink: its target).
 */
export function secretPaths(home: string = userHome()): string[] {
  const out = new Set<string>();
  const add = (p: string) => {
    try {
      lstatSync(p);
    } catch {
      return;
    }
    out.add(canonicalPath(p));
  };
  for (const d of codexHomes(home)) {
    let names: string[];
    try {
      names = readdirSync(d);
    } catch {
      continue;
    }
    for (const n of names) if (CODEX_HOME_SECRET_FILES.includes(n) || isSecretName(n)) add(join(d, n));
  }
  for (const p of hiding.secrets) add(p);
  return [...out];
}

/**
 * What a sandbox of this process hides now: the credential stores of HOME not opened by `[shellmcp]
 * sandbox_readable`, and every secret ({@link secretPaths}); the helper's fixed list when it was given one.
 */
export function hiddenPaths(home: string = userHome()): HiddenPaths {
  if (hiding.fixed !== undefined) return hiding.fixed;
  const secrets = secretPaths(home);
  const stores = credentialStores(home, hiding.open).filter((s) => !secrets.includes(s));
  return { stores, secrets };
}

/**
 * `paths` without those that lie inside another of them (absolute, canonical), in their order: a folder hidden whole
 * hides what is in it, and bubblewrap cannot mount over a path inside a folder it has hidden (the call would fail).
 */
export function outermost(paths: readonly string[]): string[] {
  const unique = [...new Set(paths)];
  return unique.filter((p) => !unique.some((q) => q !== p && isUnder(p, q)));
}

/** `--hidden-paths JSON` for our sandbox helper: `hidden` exactly (see {@link parseHiddenPaths}). */
export function hiddenPathsFlag(hidden: HiddenPaths): string[] {
  return ["--hidden-paths", JSON.stringify(hidden)];
}

/** Parse the value of `--hidden-paths` (`{"stores":[…],"secrets":[…]}`, absolute paths). Throws on anything else. */
export function parseHiddenPaths(json: string): HiddenPaths {
  const v = JSON.parse(json) as unknown;
  const list = (x: unknown): string[] => {
    if (!Array.isArray(x) || !x.every((p) => typeof p === "string" && isAbsolute(p)))
      throw new Error("--hidden-paths: lists of absolute paths expected");
    return x as string[];
  };
  if (typeof v !== "object" || v === null) throw new Error("--hidden-paths: an object expected");
  const o = v as Record<string, unknown>;
  return { stores: list(o.stores), secrets: list(o.secrets) };
}

/**
 * Every path below `top` except `hidden` (canonical absolute paths), for a backend that can only allow (Landlock):
 * `[top]` when nothing hidden lies below it, `[]` when `top` itself is hidden or lies in a hidden folder, else at
 * each folder on the way from `top` to a hidden path, every other entry of that folder. Symlinks are left out
 * (Landlock judges the file a path resolves to, so a link is followed to a root of the list, never into a hidden
 * store). Files created later beside a hidden path (in a folder on the way) are not covered. Reads folders only.
 */
export function pathsBeside(top: string, hidden: readonly string[]): string[] {
  if (hidden.some((h) => isUnder(top, h))) return [];
  const below = hidden.filter((h) => isUnder(h, top));
  if (below.length === 0) return [top];
  const hide = new Set(below);
  const onTheWay = new Set<string>();
  for (const h of below)
    for (let d = dirname(h); isUnder(d, top); d = dirname(d)) {
      onTheWay.add(d);
      if (d === top || d === "/") break;
    }
  const out: string[] = [];
  const visit = (dir: string) => {
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch {
      return;
    }
    for (const n of names) {
      const p = join(dir, n);
      if (hide.has(p)) continue;
      if (onTheWay.has(p)) {
        visit(p);
        continue;
      }
      try {
        if (lstatSync(p).isSymbolicLink()) continue;
      } catch {
        continue;
      }
      out.push(p);
    }
  };
  visit(top);
  return out;
}
