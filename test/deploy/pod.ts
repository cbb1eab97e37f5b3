/**
 * A pod made on this machine (issue 44, "The pod, simulated"): what a Kubernetes pod under the restricted Pod
 * Security Standard gives a container, built from local tools so that no cluster is needed:
 * - its own pid namespace and a read-only root (`bwrap --ro-bind ROOT /`, run as root: no user namespace) — this
 *   machine's root, or an image's root filesystem (`rootfs`) — with only the workspace, HOME (an `emptyDir`) and a
 *   fresh `/tmp` (mode 1777, as an `emptyDir`) writable, and no writable cgroup;
 * - uid/gid {@link POD_UID} with no passwd entry, no supplementary group but `fsGroup` when given, every capability
 *   dropped from the bounding set, `no_new_privs` (./no-userns.c `--uid`, linked statically so it runs in any root);
 * - an empty environment (no HOME unless given, as for an arbitrary uid) plus what the caller names;
 * - new user namespaces refused as the runtime's default seccomp profile refuses them (./no-userns.c); `gvisor: true`
 *   also answers the landlock system calls with ENOSYS, as gVisor does.
 * Needs root (to switch uids), bwrap and gcc with a static libc; {@link podMissing} says which is missing.
 */
import { chmodSync, chownSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { join } from "node:path";
import { CONF_BASE } from "../helpers/cleanup.ts";
import { toolMissing } from "../helpers/prereq.ts";

/** The uid and gid of the pod's process (distroless' `nonroot`, in no passwd file here). */
export const POD_UID = 65532;

/** Why the pod cannot be made here, or undefined. */
export function podMissing(): string | undefined {
  if (process.platform !== "linux" || process.arch !== "x64") return "Linux x86-64 only (the seccomp filter's numbers)";
  if (process.getuid?.() !== 0) return "needs root to switch to a uid without a passwd entry";
  return toolMissing("bwrap", "gcc");
}

/** One pod: its folders (host paths) and the argv prefix that runs a program inside it. */
export interface Pod {
  /** The writable workspace (owned by {@link POD_UID}); {@link wsInside} inside. */
  ws: string;
  /** The workspace's path inside the pod (`ws` itself on this machine's root, `/workspace` in an image's). */
  wsInside: string;
  /** The pod's HOME folder on the host (mode 1777, as an emptyDir); `/home/shellmcp` inside an image's root. */
  home: string;
  /** Folder outside the pod for the test's own files (read-only inside: secrets). */
  outside: string;
  /** Remove the pod's folders. */
  remove(): void;
  /**
   * argv prefix: append the program and its arguments. `env`: the whole environment (PATH is added). `secrets`: a
   * host folder mounted read-only at `/run/secrets/shellmcp` (image roots only; on this machine's root it is
   * read-only where it is). `binds`: host folders writable at the same path (this machine's root only: a workspace
   * a client on the host names by its host path, as Codex does). `hostPid`: no pid namespace of its own (a test
   * that names the server's pid to commands and checks it from the host).
   */
  argv(
    env?: Record<string, string>,
    opts?: { gvisor?: boolean; fsGroup?: number; secrets?: string; binds?: string[]; hostPid?: boolean },
  ): string[];
}

let wrapperDir: string | undefined;

/** Compile ./no-userns.c statically once per test process, into a folder of its own (bound at /mnt in images). */
function seccompWrapperDir(): string {
  if (wrapperDir !== undefined) return wrapperDir;
  const dir = mkdtempSync(join(CONF_BASE, "no-userns-"));
  chmodSync(dir, 0o755);
  const r = Bun.spawnSync(["gcc", "-static", "-O2", "-o", join(dir, "no-userns"), join(import.meta.dir, "no-userns.c")], {
    stderr: "pipe",
  });
  if (r.exitCode !== 0) throw new Error(`gcc -static no-userns.c: ${r.stderr.toString()}`);
  wrapperDir = dir;
  return dir;
}

/** Make a pod's folders (under CONF_BASE: outside every writable root of the host's tests); `rootfs`: an image's root. */
export function makePod(rootfs?: string): Pod {
  const base = mkdtempSync(join(CONF_BASE, "pod-"));
  chmodSync(base, 0o755);
  const ws = join(base, "workspace");
  const tmp = join(base, "tmp");
  const home = join(base, "home");
  const outside = join(base, "outside");
  mkdirSync(ws);
  chownSync(ws, POD_UID, POD_UID);
  for (const d of [tmp, home]) {
    mkdirSync(d);
    chmodSync(d, 0o1777);
  }
  mkdirSync(outside, { mode: 0o755 });
  const wrapDir = seccompWrapperDir();
  const wsInside = rootfs === undefined ? ws : "/workspace";
  return {
    ws,
    wsInside,
    home,
    outside,
    remove: () => rmSync(base, { recursive: true, force: true }),
    argv(env = {}, opts = {}) {
      const root =
        rootfs === undefined
          ? ["--ro-bind", "/", "/", "--bind", ws, ws, "--bind", tmp, "/tmp", ...(opts.binds ?? []).flatMap((b) => ["--bind", b, b])]
          : [
              ...["--ro-bind", rootfs, "/", "--bind", ws, wsInside, "--bind", tmp, "/tmp", "--bind", home, "/home/shellmcp"],
              ...["--ro-bind", wrapDir, "/mnt"],
              ...(opts.secrets === undefined ? [] : ["--ro-bind", opts.secrets, "/run/secrets/shellmcp"]),
            ];
      const wrapper = rootfs === undefined ? join(wrapDir, "no-userns") : "/mnt/no-userns";
      const vars = { PATH: "/usr/local/bin:/usr/bin:/bin", ...env };
      return [
        "bwrap",
        ...root,
        ...[
          "--dev",
          "/dev",
          "--proc",
          "/proc",
          "--chdir",
          wsInside,
          ...(opts.hostPid === true ? [] : ["--unshare-pid"]),
          "--die-with-parent",
          "--clearenv",
        ],
        ...Object.entries(vars).flatMap(([k, v]) => ["--setenv", k, v]),
        "--",
        wrapper,
        ...["--uid", String(POD_UID), "--gid", String(POD_UID)],
        ...(opts.fsGroup === undefined ? [] : ["--group", String(opts.fsGroup)]),
        ...(opts.gvisor === true ? ["--no-landlock"] : []),
      ];
    },
  };
}
