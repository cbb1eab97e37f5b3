/**
 * The differential tier (issue 38, "The boundary's model checked against the kernel"): what the writable model
 * says a call's shell can write (src/sandbox/writable.ts `canWrite` on the call's `CallSandbox.writable()` view)
 * against what a probe achieves inside that call's real sandbox, started from the same `CallSandbox` with its own
 * `launch()` argv (so both come from one plan, as in `serve`). One sandbox start runs many probes (probe.py): a
 * JSON line per operation.
 *
 * What each operation needs, in the model's terms (W = `canWrite(view, ·)`, which canonicalises the path and so
 * judges a symlink by its target; "the entry" = the name itself, which an operation that does not follow links
 * acts on):
 * - create, mkdir, symlink (missing parents made first), write (open for append), truncate (to its own size), chmod,
 *   chown, utime (to its own mode, owner, times): W(path);
 * - renamein (a new file in the root's scratch folder renamed to the missing path): W(path) and W(scratch name);
 * - rename (to a new sibling) and move (into the scratch folder of its root): the entry's folder W(dirname), the
 *   entry itself W(path) unless it is a symlink, and W(new name);
 * - link (hard link to a new sibling, links not followed): W(new name), and W(path) unless it is a symlink — a
 *   hard link of a read-only file under a writable name would be a writable alias of it;
 * - linkin (hard link into the scratch folder, links followed): W(path) and W(new name).
 *
 * Not probed, and why: unlink and rmdir (the same right on the entry's folder as rename, which is probed, and not
 * put back); open with O_TRUNC (truncate's right, and destructive); device nodes (refused by seccomp and Landlock
 * whatever the model says: the model is about files); FIFOs and sockets (the folder's right, as create); extended
 * attributes (Landlock has no right for them either: the metadata gap below); `/dev/shm`, which the model counts
 * writable under Landlock only, because bubblewrap gives the sandbox a private `/dev` whose writes reach no host
 * file (a probe there would "succeed" without a host effect).
 *
 * Where the kernel is stricter than the model for a reason the model does not describe (it has no mount points,
 * no Landlock ABI, no permission bits), the difference is accepted only under a named rule of {@link STRICTER}
 * matched on the operation, backend and errno. Where the kernel allows what the model denies — a write the
 * escalation boundary would not expect — the difference is a hole: it fails the tier unless it is listed, with its
 * reason, in {@link KNOWN_GAPS}.
 */
import {
  chmodSync,
  closeSync,
  existsSync,
  lstatSync,
  mkdtempSync,
  openSync,
  readdirSync,
  realpathSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { CallSandbox, type SandboxBackend } from "../../../src/sandbox/backend.ts";
import { landlockCanEnforce } from "../../../src/sandbox/filesystem-plan.ts";
import { HelperBackend } from "../../../src/sandbox/linux/backend.ts";
import { landlockAbi, SIMULATE_ABI_ENV } from "../../../src/sandbox/linux/landlock.ts";
import { protectedConfigDirs, setProtectedConfigDirs } from "../../../src/sandbox/policy.ts";
import { canWrite, type WritableView } from "../../../src/sandbox/writable.ts";
import { makeLayout, type Layout, type Op, type Probe } from "./layout.ts";

const ROOT = join(import.meta.dir, "..", "..", "..");
/** The worktree's helper, by its role name (argv[0] `codex-linux-sandbox`). */
export const HELPER = join(ROOT, "dist", "codex-linux-sandbox");
const PROBE = join(import.meta.dir, "probe.py");
const PYTHON = "/usr/bin/python3";

/**
 * One way of confining a call, as the tier runs it: our bubblewrap started directly (as `serve` does once the
 * preflight passed) or through our helper; our Landlock helper at the kernel's ABI or a simulated lower one
 * (`SHELLMCP_SIMULATE_LANDLOCK_ABI`, which can only lower it). (Codex 0.97's own helper, the reference, is built
 * without bubblewrap: its model, `pinned` false, is not run here.)
 */
export type Backend = { kind: "bwrap"; via: "direct" | "helper" } | { kind: "landlock"; abi: number };

/** A backend's name in reports. */
export function backendName(b: Backend): string {
  return b.kind === "bwrap" ? `bwrap(${b.via})` : `landlock(abi ${b.abi})`;
}

/** The backends this machine can run: bubblewrap when installed, Landlock at every ABI from 1 to the kernel's. */
export function availableBackends(): { bwrap?: string; landlockAbi: number } {
  const bwrap = ["/usr/bin/bwrap", "/usr/local/bin/bwrap"].find((p) => existsSync(p));
  return { bwrap, landlockAbi: landlockAbi({}) };
}

/** One operation's outcome. */
export interface Outcome {
  probe: Probe;
  backend: string;
  model: boolean;
  kernel: boolean;
  errno?: string;
  /** A named {@link STRICTER} rule or {@link KNOWN_GAPS} entry that accounts for a difference. */
  rule?: string;
  /** The probe could not put back what it changed. */
  dirty?: string;
}

/**
 * Where a call runs: its policy, policy cwd (`ws`), workdir and shell environment; the server's `$TMPDIR` (the
 * shell's unless `envDiffers`); the protected config folder (CODEX_HOME's stand-in) when there is one. A
 * {@link Layout} is one.
 */
export type CallSite = Pick<Layout, "policy" | "ws" | "workdir" | "env"> &
  Partial<Pick<Layout, "profile" | "serverTmpdir" | "envDiffers" | "codexHome">>;

interface Ctx {
  backend: Backend;
  op: Op;
  /** The probe's path (and second name), for gaps tied to a place. */
  path: string;
  errno?: string;
  layout: CallSite;
  /** A file or folder the operation needs has a mode denying its owner write (the sandbox's uid owns the layout). */
  modeBlocked: boolean;
}

/** Kernel stricter than the model, for a reason the model does not describe. Matched only when the model allows. */
export const STRICTER: { name: string; why: string; applies: (c: Ctx) => boolean }[] = [
  {
    name: "bwrap-mount-points",
    why:
      "bubblewrap: a writable root, a read-only bind and a pinned folder (policy.ts pinFolders) are mount points; " +
      "renaming one fails (EBUSY) and so does a rename or hard link across them (EXDEV). The model answers per path.",
    applies: (c) =>
      c.backend.kind === "bwrap" &&
      ["rename", "move", "link", "linkin", "renamein"].includes(c.op) &&
      (c.errno === "EXDEV" || c.errno === "EBUSY"),
  },
  {
    name: "landlock-abi1-no-refer",
    why: "Landlock ABI 1 has no REFER right: every rename or link into another folder fails with EXDEV.",
    applies: (c) =>
      c.backend.kind === "landlock" && c.backend.abi < 2 && ["move", "linkin", "renamein"].includes(c.op) && c.errno === "EXDEV",
  },
  {
    name: "landlock-truncate-below-abi3",
    why: "below Landlock ABI 3 (no TRUNCATE right) seccomp refuses truncate(2) everywhere (issue 34, item 7a).",
    applies: (c) => c.backend.kind === "landlock" && c.backend.abi < 3 && c.op === "truncate" && c.errno === "EPERM",
  },
  {
    name: "permission-bits",
    why:
      "the model ignores permission bits: the sandbox has no capabilities, so a mode denying its uid gives EACCES; it " +
      "owns the file and may chmod it back, so the model's 'writable' is right about what it can change.",
    applies: (c) => c.modeBlocked && c.errno === "EACCES",
  },
];

/**
 * Kernel allows what the model denies: holes, each a finding reported by the tier, not hidden. An entry stays
 * here only while the gap exists; its assertion is active for everything else.
 */
export const KNOWN_GAPS: { name: string; why: string; applies: (c: Ctx) => boolean }[] = [
  {
    name: "landlock-metadata-anywhere",
    why:
      "Landlock has no access right for chmod, chown or utimes (nor xattrs): under the Landlock backend a sandboxed " +
      "command changes the mode, group and times of any file its uid owns outside every writable root (for a server " +
      "run as root: chmod 666 /etc/shadow, chmod +x, setuid bits). The model (and seccomp) say nothing of it. Found " +
      "by this tier.",
    applies: (c) => c.backend.kind === "landlock" && ["chmod", "chown", "utime"].includes(c.op),
  },
];

/** The CallSandbox a call at `layout` under `backend` gets, as src/serve/backend.ts builds it. */
export function callFor(layout: CallSite, backend: Backend, bwrap?: string): CallSandbox {
  const protect = layout.codexHome !== undefined ? ["--protected-config-dir", layout.codexHome] : [];
  const flags = (kind: string) => ["--backend", kind, ...protect];
  let b: SandboxBackend;
  if (backend.kind === "bwrap")
    b = new HelperBackend("bwrap", HELPER, flags("bwrap"), backend.via === "direct" ? { bwrap: bwrap!, noProc: false } : undefined);
  else b = new HelperBackend("landlock", HELPER, flags("landlock"));
  return new CallSandbox(b, {
    policy: layout.policy,
    ...(layout.profile !== undefined ? { profile: layout.profile } : {}),
    policyCwd: layout.ws,
    workdir: layout.workdir,
    env: layout.env,
  });
}

function modeOf(p: string): number | undefined {
  try {
    return statSync(p).mode;
  } catch {
    return undefined;
  }
}

function nearestExisting(p: string): string {
  let d = p;
  while (!existsSync(d) && dirname(d) !== d) d = dirname(d);
  return d;
}

function isLink(p: string): boolean {
  try {
    return lstatSync(p).isSymbolicLink();
  } catch {
    return false;
  }
}

/** The model's answer for `probe` (see the file's comment for what each operation needs). */
export function expected(view: WritableView, probe: Probe): boolean {
  const W = (p: string) => canWrite(view, p);
  const { op, path, aux } = probe;
  const self = isLink(path) || W(path);
  switch (op) {
    case "create":
    case "mkdir":
    case "symlink":
    case "write":
    case "truncate":
    case "chmod":
    case "chown":
    case "utime":
      return W(path);
    case "renamein":
    case "linkin":
      return W(path) && W(aux!);
    case "rename":
    case "move":
      return W(dirname(path)) && self && W(aux!);
    case "link":
      return self && W(aux!);
  }
}

function modeBlocked(probe: Probe): boolean {
  const on = [probe.path, dirname(probe.path), nearestExisting(probe.path), ...(probe.aux ? [dirname(probe.aux)] : [])];
  return on.some((p) => {
    const m = modeOf(p);
    return m !== undefined && (m & 0o200) === 0;
  });
}

/** Every entry under `dir`: path → type, mode, size, link target (what a probe must leave as it was). */
export function snapshot(dir: string): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (d: string) => {
    for (const e of readdirSync(d)) {
      const p = join(d, e);
      const st = lstatSync(p);
      out.set(p, `${st.mode.toString(8)} ${st.isDirectory() ? "-" : st.size}`);
      if (st.isDirectory()) walk(p);
    }
  };
  walk(dir);
  return out;
}

/**
 * Run `probes` in one start of `call`'s sandbox (its own `launch()` argv, seccomp program and all, in the layout's
 * workdir) and compare each with the model. `abi`: a simulated lower Landlock ABI for the helper.
 */
export async function runCall(call: CallSandbox, backend: Backend, layout: CallSite, probes: Probe[]): Promise<Outcome[]> {
  // The view and bubblewrap started directly are planned in this process, as in `serve`: with the server's
  // $TMPDIR (a permission profile's `tmpdir` entry reads it too).
  const saved = process.env.TMPDIR;
  const serverTmpdir = layout.serverTmpdir ?? layout.env.TMPDIR;
  if (serverTmpdir === undefined) delete process.env.TMPDIR;
  else process.env.TMPDIR = serverTmpdir;
  let launch: ReturnType<CallSandbox["launch"]>;
  let models: boolean[];
  let refused: string | undefined;
  try {
    const view = call.writable();
    models = probes.map((p) => expected(view, p));
    // A profile Landlock cannot enforce (read-only or denied paths inside a writable root): serve refuses the call
    // (src/serve/backend.ts); the helper must refuse it too, running nothing.
    refused = call.enforcement === "landlock" ? landlockCanEnforce(call.plan()) : undefined;
    launch = call.launch({ shellPath: "/bin/sh", login: false, command: `exec ${PYTHON} ${PROBE}`, wrapperPath: "/nonexistent" });
  } finally {
    if (saved === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = saved;
  }
  const scratch = mkdtempSync(join(tmpdir(), "differential-fd-"));
  const stdio: (number | "pipe" | "ignore")[] = ["pipe", "pipe", "pipe"];
  const opened: number[] = [];
  try {
    if (launch.seccomp !== undefined) {
      const f = join(scratch, "seccomp.bpf");
      writeFileSync(f, launch.seccomp.program);
      const fd = openSync(f, "r");
      opened.push(fd);
      while (stdio.length < launch.seccomp.fd) stdio.push("ignore");
      stdio[launch.seccomp.fd] = fd;
    }
    // The server's loopback network's namespaces (src/sandbox/linux/loopback-net.ts), as src/shell/spawn-plan.ts places them.
    for (const [at, fd] of launch.fds ?? []) {
      while (stdio.length < at) stdio.push("ignore");
      stdio[at] = fd;
    }
    const env: Record<string, string> = { ...layout.env, ...launch.env };
    if (backend.kind === "landlock") env[SIMULATE_ABI_ENV] = String(backend.abi);
    const input = JSON.stringify(probes.map((p, id) => ({ id, ...p })));
    const child = Bun.spawn(launch.argv, {
      cwd: layout.workdir,
      env,
      stdio: stdio as ["pipe", "pipe", "pipe"],
      ...(launch.argv0 !== undefined ? { argv0: launch.argv0 } : {}),
    });
    // stdin is fed while stdout and stderr are read, so a child that answers before it reads everything never blocks.
    const fed = (async () => {
      await child.stdin.write(input);
      await child.stdin.end();
    })();
    const [out, err, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited, fed]);
    const lines = out.split("\n").filter((l) => l.startsWith("{"));
    if (refused !== undefined) {
      if (code === 0 || lines.length > 0)
        throw new Error(
          `${backendName(backend)}: the helper ran a call the plan refuses (${refused}): exit ${code}, ${lines.length} probes`,
        );
      return [];
    }
    if (code !== 0 || lines.length !== probes.length)
      throw new Error(
        `${backendName(backend)}: the probe did not run (exit ${code}, ${lines.length}/${probes.length} lines): ${err.slice(0, 800)}`,
      );
    return lines.map((l) => {
      const r = JSON.parse(l) as { id: number; ok: boolean; errno?: string; dirty?: string };
      const probe = probes[r.id]!;
      const o: Outcome = { probe, backend: backendName(backend), model: models[r.id]!, kernel: r.ok, errno: r.errno, dirty: r.dirty };
      if (o.model !== o.kernel) {
        const c: Ctx = { backend, layout, op: probe.op, path: probe.path, errno: r.errno, modeBlocked: modeBlocked(probe) };
        o.rule = (o.model ? STRICTER : KNOWN_GAPS).find((x) => x.applies(c))?.name;
      }
      return o;
    });
  } finally {
    for (const fd of opened) closeSync(fd);
    rmSync(scratch, { recursive: true, force: true });
    launch.release?.();
  }
}

/** A disagreement that no rule accounts for, or a probe that left the layout changed. */
export function isFailure(o: Outcome): boolean {
  return (o.model !== o.kernel && o.rule === undefined) || o.dirty !== undefined;
}

/** One line per outcome for a report: path (relative to the layout), operation, backend, model, kernel. */
export function describe(o: Outcome, base: string): string {
  const rel = (p: string) => (p.startsWith(base + "/") ? p.slice(base.length + 1) : p);
  const k = o.kernel ? "ok" : (o.errno ?? "denied");
  return (
    `${o.backend} ${o.probe.op} ${rel(o.probe.path)}${o.probe.aux ? ` -> ${rel(o.probe.aux)}` : ""}: ` +
    `model ${o.model ? "writable" : "read-only"}, kernel ${k}${o.rule ? ` [${o.rule}]` : ""}${o.dirty ? ` (not put back: ${o.dirty})` : ""}`
  );
}

/** Result of one layout under one backend. */
export interface LayoutRun {
  layout: Layout;
  backend: Backend;
  outcomes: Outcome[];
  /** Entries of the layout that differ after the run (path: before → after). */
  changed: string[];
  ms: number;
}

/**
 * Make layout `seed` in a fresh folder under `parent` — best outside /tmp and every other server's writable roots:
 * a git guard of a server running meanwhile with /tmp writable (other tests) "repairs" repositories there while
 * the probes rename them about — run `pick(probes)` under each backend (one sandbox start
 * each; the layout is checked unchanged after each), remove it. Sets the protected config folders of this process
 * to the layout's CODEX_HOME stand-in while planning (as `serve` does at start-up), and puts them back.
 */
export async function runLayout(
  seed: number,
  backends: Backend[],
  pick: (probes: Probe[], backend: Backend) => Probe[],
  bwrap?: string,
  parent: string = tmpdir(),
): Promise<LayoutRun[]> {
  const base = realpathSync(mkdtempSync(join(parent, "differential-")));
  const saved = protectedConfigDirs();
  try {
    const layout = makeLayout(base, seed);
    setProtectedConfigDirs([layout.codexHome]);
    const runs: LayoutRun[] = [];
    for (const backend of backends) {
      const before = snapshot(base);
      const t0 = performance.now();
      const probes = pick(layout.probes, backend);
      const outcomes = await runCall(callFor(layout, backend, bwrap), backend, layout, probes);
      const ms = performance.now() - t0;
      const after = snapshot(base);
      const changed: string[] = [];
      for (const [p, v] of before) if (after.get(p) !== v) changed.push(`${p}: ${v} -> ${after.get(p) ?? "gone"}`);
      for (const [p, v] of after) if (!before.has(p)) changed.push(`${p}: new ${v}`);
      runs.push({ layout, backend, outcomes, changed, ms });
    }
    return runs;
  } finally {
    setProtectedConfigDirs(saved);
    if (existsSync(join(base, "ws", "rodir"))) chmodSync(join(base, "ws", "rodir"), 0o755);
    rmSync(base, { recursive: true, force: true });
  }
}
