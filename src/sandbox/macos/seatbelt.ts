/**
 * macOS Seatbelt: from a {@link FilesystemPlan} (a legacy `SandboxPolicy` or a Codex 0.169 permission profile,
 * resolved against the sandbox cwd by permission-profile.ts) to the policy text and the
 * `/usr/bin/sandbox-exec -p POLICY -DKEY=VALUE… -- CMD…` argv Codex builds (docs/seatbelt.md).
 *
 * Pure string generation: nothing here asks which OS it runs on. Path canonicalisation is injected
 * ({@link SeatbeltHost}); {@link darwinPath} applies macOS's view (`/tmp` → `/private/tmp`, `/var` →
 * `/private/var`, `/etc` → `/private/etc`) on top of `realpath`, so the same code gives the same policy on a Mac
 * and in Linux golden tests.
 *
 * Sections, in Codex's order: base rules (rules.ts), read, write, network, platform defaults. Parameters, in
 * Codex's order: `READABLE_ROOT_i` (+ `READABLE_ROOT_i_EXCLUDED_j`), then `WRITABLE_ROOT_i` (+
 * `WRITABLE_ROOT_i_EXCLUDED_j`). Every path travels as a `-D` parameter, never inside the policy text, so spaces,
 * quotes or parentheses in a path cannot change the policy.
 *
 * Where shellmcp is stricter than Codex (docs/seatbelt.md has the full trace):
 * - each excluded subpath is refused both as `literal` and `subpath` (Codex 0.97 only had `subpath`, which let a
 *   command create a missing `.codex` and then write inside it);
 * - for legacy policies, `.git`, `.agents` and `.codex` are kept read-only under every writable root even when
 *   they do not exist yet (Codex 0.169 does this with regexes spliced into the text; we use parameters);
 * - a writable root that contains another (a cwd under `/tmp`) also excludes the inner root's carve-outs.
 */
import { lstatSync, readlinkSync, realpathSync } from "node:fs";
import { basename, dirname, join, normalize, resolve } from "node:path";
import { isUnder } from "../paths.ts";
import { PROTECTED_NAMES } from "../protected-config.ts";
import type { WritableRoot } from "../writable-model.ts";
import type { FilesystemPlan } from "../filesystem-plan.ts";
import type { WritableView } from "../writable.ts";
import { BASE_RULES, DYNAMIC_RULE_IDS, NETWORK_RULES, PLATFORM_DEFAULT_RULES, renderRules, type SeatbeltRule } from "./rules.ts";

/** Absolute path of sandbox-exec: never looked up on PATH (a planted `sandbox-exec` would run unsandboxed). */
export const SANDBOX_EXEC_PATH = "/usr/bin/sandbox-exec";

/** macOS top-level symlinks into /private (firmlinks as the kernel reports paths). */
export const DARWIN_PRIVATE_LINKS = ["/tmp", "/var", "/etc"] as const;

/** How paths are turned into the form Seatbelt matches against (the kernel's canonical path). */
export interface SeatbeltHost {
  /** Canonical form of an absolute path that may not exist. Default: {@link darwinPath} over the real fs. */
  canonicalize(path: string): string;
}

/**
 * The path as macOS reports it to Seatbelt: symlinks resolved (the nearest existing ancestor's real path, with
 * the missing components appended), then `/tmp`, `/var`, `/etc` moved under `/private`. On a Mac `realpath`
 * already does the second step; on Linux it is what lets golden tests show what a Mac would get.
 * `realpath` is injectable for tests; it throws for a missing path (like `fs.realpathSync`).
 */
export function darwinPath(path: string, realpath: (p: string) => string = realpathSync): string {
  let n = normalize(path);
  while (n.length > 1 && n.endsWith("/")) n = n.slice(0, -1);
  const real = nearestReal(n, realpath, 0);
  for (const link of DARWIN_PRIVATE_LINKS) {
    if (real === link || real.startsWith(link + "/")) return "/private" + real;
  }
  return real;
}

function nearestReal(p: string, realpath: (p: string) => string, depth: number): string {
  try {
    return realpath(p);
  } catch {
    // A dangling symlink is judged by where it points (a command could create the target later).
    try {
      if (depth < 40 && lstatSync(p).isSymbolicLink()) return nearestReal(resolve(dirname(p), readlinkSync(p)), realpath, depth + 1);
    } catch {
      // not a link, or gone
    }
    const parent = dirname(p);
    if (parent === p) return p;
    return join(nearestReal(parent, realpath, depth + 1), basename(p));
  }
}

/** The default host: {@link darwinPath} over the real file system. */
export const DARWIN_HOST: SeatbeltHost = { canonicalize: (p) => darwinPath(p) };

/** Options of the generator. */
export interface SeatbeltOptions {
  /** Extra readable roots when reads are restricted (e.g. this binary's folder, the patched shell's folder). */
  extraReadableRoots?: string[];
  host?: SeatbeltHost;
  /**
   * Network proxy mode (docs/network.md): with the network enabled, outbound connections only to the proxy's
   * loopback `ports` (instead of any); `allowLocalBinding` adds local bind, inbound and outbound on localhost, as
   * Codex 0.169 (without its `*:53` DNS rule). An empty port list leaves no outbound rule (fail closed).
   */
  proxy?: { ports: readonly number[]; allowLocalBinding: boolean };
}

/** A generated policy: the text and its `-D` parameters in order. */
export interface SeatbeltPolicy {
  text: string;
  params: Array<[key: string, value: string]>;
}

interface AccessRoot {
  root: string;
  excluded: string[];
}

/** `(allow ACTION …)` over roots given as parameters `PREFIX_i`, each minus its `PREFIX_i_EXCLUDED_j`. */
function accessSection(id: string, why: string, action: string, prefix: string, roots: AccessRoot[]): SeatbeltPolicy {
  if (roots.length === 0) return { text: "", params: [] };
  const params: Array<[string, string]> = [];
  const parts: string[] = [];
  roots.forEach((r, i) => {
    const key = `${prefix}_${i}`;
    params.push([key, r.root]);
    if (r.excluded.length === 0) {
      parts.push(`(subpath (param "${key}"))`);
      return;
    }
    const req = [`(subpath (param "${key}"))`];
    r.excluded.forEach((x, j) => {
      const xkey = `${key}_EXCLUDED_${j}`;
      params.push([xkey, x]);
      req.push(`(require-not (literal (param "${xkey}")))`, `(require-not (subpath (param "${xkey}")))`);
    });
    parts.push(`(require-all ${req.join(" ")})`);
  });
  return { text: `; [${id}] ${why}\n(allow ${action}\n  ${parts.join("\n  ")})`, params };
}

function dedupe(paths: string[]): string[] {
  return [...new Set(paths)];
}

/**
 * The paths Seatbelt must refuse for one restricted path: the path itself with only its folder canonicalised (if
 * it is a symlink, the link: otherwise a command could remove `.git -> elsewhere` and create a real `.git` in its
 * place), and, when different, where it resolves to (what writes through the link reach).
 */
function restrictedForms(p: string, host: SeatbeltHost): string[] {
  const own = join(host.canonicalize(dirname(p)), basename(p));
  const full = host.canonicalize(p);
  return own === full ? [own] : [own, full];
}

/**
 * Read-only subpaths of one writable root (canonical). Strict plans (permission profiles): as the plan lists them.
 * Legacy plans: whatever the root lists besides the protected names (a gitdir a `.git` file points at) first, then
 * `.git`, `.agents`, `.codex` in that fixed order whether or not they exist, so that the policy text never depends
 * on what happens to exist on the host (a `/tmp/.codex` used to reorder the parameters: issue 20).
 */
function ownCarveOuts(plan: FilesystemPlan, w: WritableRoot, host: SeatbeltHost): string[] {
  if (plan.strict) return w.readOnlySubpaths.flatMap((p) => restrictedForms(p, host));
  const fixed = PROTECTED_NAMES.map((name) => join(w.root, name));
  const others = w.readOnlySubpaths.filter((p) => !fixed.includes(p));
  return [...others, ...fixed].flatMap((p) => restrictedForms(p, host));
}

/**
 * What stays unwritable inside each writable root: its own carve-outs first, then every other root's carve-outs
 * and every denied path that lies inside it. Seatbelt allows are a union, so without the second part a root that
 * contains another (the cwd under `/tmp`) would re-open the inner root's `.git` (a gap Codex has).
 */
function writeRoots(plan: FilesystemPlan, denied: string[], host: SeatbeltHost): AccessRoot[] {
  const roots = plan.writableRoots.map((w) => ({ root: host.canonicalize(w.root), own: ownCarveOuts(plan, w, host) }));
  const all = [...roots.flatMap((r) => r.own), ...denied];
  return roots.map(({ root, own }) => ({
    root,
    excluded: dedupe([...own, ...all.filter((c) => isUnder(c, root))]).filter((c) => c !== root),
  }));
}

const RENDERED = new Map<string, string>();
/** The fixed sections' text, rendered once per process (they do not depend on the plan). */
function rendered(which: "base" | "network" | "platform"): string {
  let t = RENDERED.get(which);
  if (t === undefined) {
    t = renderRules(which === "base" ? BASE_RULES : which === "network" ? NETWORK_RULES : PLATFORM_DEFAULT_RULES);
    RENDERED.set(which, t);
  }
  return t;
}

/**
 * The Seatbelt policy for `plan` (which must be sandboxed). Throws nothing: every plan has a policy; an empty
 * readable-root list simply reads nothing.
 *
 * Mirrors Codex's `create_seatbelt_command_args` (0.97 core/src/seatbelt.rs, 0.169 sandboxing/src/seatbelt.rs)
 * without the managed-proxy network mode (network is off or fully on).
 */
export function seatbeltPolicy(plan: FilesystemPlan, o: SeatbeltOptions = {}): SeatbeltPolicy {
  const host = o.host ?? DARWIN_HOST;
  const denied = dedupe(plan.deniedPaths.flatMap((d) => restrictedForms(d, host)));

  // Read section.
  let read: SeatbeltPolicy;
  if (plan.fullRead && denied.length === 0) {
    read = { text: `; [${DYNAMIC_RULE_IDS.fullRead}] every file may be read\n(allow file-read*)`, params: [] };
  } else {
    const roots = plan.fullRead
      ? ["/"]
      : dedupe(
          [...plan.readableRoots, ...plan.writableRoots.map((w) => w.root), ...(o.extraReadableRoots ?? [])].map((r) =>
            host.canonicalize(r),
          ),
        );
    read = accessSection(
      DYNAMIC_RULE_IDS.restrictedRead,
      "files may be read under these roots only",
      "file-read*",
      "READABLE_ROOT",
      roots.map((root) => ({ root, excluded: denied.filter((d) => isUnder(d, root) && d !== root) })),
    );
  }

  // Write section.
  let write: SeatbeltPolicy;
  if (plan.fullWrite && denied.length === 0) {
    write = { text: `; [${DYNAMIC_RULE_IDS.fullWrite}] every file may be written\n(allow file-write* (regex #"^/"))`, params: [] };
  } else {
    const roots: AccessRoot[] = plan.fullWrite ? [{ root: "/", excluded: denied }] : writeRoots(plan, denied, host);
    write = accessSection(
      DYNAMIC_RULE_IDS.rootsWrite,
      "files may be written under these roots, except the read-only paths inside them",
      "file-write*",
      "WRITABLE_ROOT",
      roots,
    );
  }

  const sections = ["(version 1)", rendered("base"), read.text, write.text];
  if (plan.network === "enabled" && o.proxy !== undefined) sections.push(renderRules(proxyNetworkRules(o.proxy)));
  else if (plan.network === "enabled") sections.push(rendered("network"));
  if (plan.includePlatformDefaults && !plan.fullRead) sections.push(rendered("platform"));
  return { text: sections.filter((s) => s !== "").join("\n") + "\n", params: [...read.params, ...write.params] };
}

/** What to run: the argv, the variables to add to the environment, and whether it is sandboxed. */
export interface SeatbeltLaunch {
  argv: string[];
  env: Record<string, string>;
  sandboxed: boolean;
  /** The policy, when sandboxed (for `--print-policy`). */
  policy?: SeatbeltPolicy;
}

/**
 * How to start `command` under `plan` on macOS: `/usr/bin/sandbox-exec -p POLICY -DK=V… -- command…`, with
 * `CODEX_SANDBOX=seatbelt` and, when the network is off, `CODEX_SANDBOX_NETWORK_DISABLED=1` (Codex's markers).
 * Unsandboxed plans (danger-full-access, or full write + full read + network on with nothing denied) run the
 * command as is, without markers, as Codex does. Throws `USAGE`-free: an empty command is the caller's error.
 */
export function seatbeltLaunch(plan: FilesystemPlan, command: string[], o: SeatbeltOptions = {}): SeatbeltLaunch {
  const open =
    !plan.sandboxed ||
    (plan.fullWrite && plan.fullRead && plan.network === "enabled" && plan.deniedPaths.length === 0 && o.proxy === undefined);
  if (open) return { argv: [...command], env: {}, sandboxed: false };
  const policy = seatbeltPolicy(plan, o);
  const env: Record<string, string> = { CODEX_SANDBOX: "seatbelt" };
  if (plan.network !== "enabled") env.CODEX_SANDBOX_NETWORK_DISABLED = "1";
  return {
    argv: [SANDBOX_EXEC_PATH, "-p", policy.text, ...policy.params.map(([k, v]) => `-D${k}=${v}`), "--", ...command],
    env,
    sandboxed: true,
    policy,
  };
}

/**
 * For `serve` on macOS: the argv that starts the patched shell (`shellPath -lc|-c command`) under Seatbelt for
 * one `shell` call, and the variables to add to its environment. `shellPath` and `exePath` (this binary, which the
 * exec wrapper runs as) are made readable when reads are restricted, so the shell and its wrapper can start.
 * Escalated programs are started by the escalation server, outside this sandbox.
 */
export function seatbeltShellLaunch(
  plan: FilesystemPlan,
  shell: { shellPath: string; login: boolean; command: string; exePath: string },
  host?: SeatbeltHost,
  proxy?: SeatbeltOptions["proxy"],
): SeatbeltLaunch {
  const argv = [shell.shellPath, shell.login ? "-lc" : "-c", shell.command];
  return seatbeltLaunch(plan, argv, {
    extraReadableRoots: [dirname(shell.shellPath), dirname(shell.exePath)],
    host,
    ...(proxy !== undefined ? { proxy } : {}),
  });
}

/**
 * The network section of proxy mode: rule N05 (outbound only to the proxy's loopback ports, Codex's
 * `(remote ip "localhost:<port>")` per port), N06 with `allow_local_binding`, then Codex's system-service rules
 * N02–N04 (TLS certificate checks, network configuration). Ports are numbers, never user text.
 */
export function proxyNetworkRules(proxy: NonNullable<SeatbeltOptions["proxy"]>): SeatbeltRule[] {
  const ports = proxy.ports.filter((p) => Number.isInteger(p) && p > 0 && p < 65536);
  const rules: SeatbeltRule[] = [];
  if (ports.length > 0)
    rules.push({
      id: DYNAMIC_RULE_IDS.proxyOutbound,
      why: "network proxy mode: outbound connections only to the proxy's loopback ports",
      sbpl: ports.map((p) => `(allow network-outbound (remote ip "localhost:${p}"))`).join("\n"),
    });
  if (proxy.allowLocalBinding)
    rules.push({
      id: DYNAMIC_RULE_IDS.proxyLocal,
      why: "allow_local_binding: bind anywhere, inbound and outbound on localhost",
      sbpl: '(allow network-bind (local ip "*:*"))\n(allow network-inbound (local ip "localhost:*"))\n(allow network-outbound (remote ip "localhost:*"))',
    });
  return [...rules, ...NETWORK_RULES.filter((r) => r.id !== "N01")];
}

/** Folders the platform defaults (rule P08) make writable when reads are restricted. */
export const PLATFORM_DEFAULT_WRITABLE = ["/private/tmp", "/private/var/tmp"];

/**
 * What a shell under {@link seatbeltLaunch}'s policy can write, for the escalation boundary (the `WritableView`
 * of writable.ts, with macOS paths): the writable roots, the scratch folders of the platform defaults when they
 * are in the policy, and every path the write section excludes. Conservative where Seatbelt is narrower (full
 * write with denied paths counts as full).
 */
export function seatbeltWritableView(plan: FilesystemPlan, host: SeatbeltHost = DARWIN_HOST): WritableView {
  if (!plan.sandboxed || plan.fullWrite) return { full: true, roots: [], readOnly: [] };
  const denied = dedupe(plan.deniedPaths.flatMap((d) => restrictedForms(d, host)));
  const roots = writeRoots(plan, denied, host);
  const scratch = plan.includePlatformDefaults && !plan.fullRead ? PLATFORM_DEFAULT_WRITABLE : [];
  return { full: false, roots: dedupe([...roots.map((r) => r.root), ...scratch]), readOnly: dedupe(roots.flatMap((r) => r.excluded)) };
}
