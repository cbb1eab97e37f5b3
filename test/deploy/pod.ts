/**
 * A pod made on this machine (issue 44, "The pod, simulated"): what a Kubernetes pod under the restricted Pod
 * Security Standard gives a container, built from local tools so that no cluster is needed:
 * - its own pid namespace; a read-only root (`bwrap --ro-bind / /`, run as root: no user namespace) with only the workspace and a fresh
 *   `/tmp` (mode 1777, as an `emptyDir`) writable, and a read-only `/sys/fs/cgroup` (no writable cgroup);
 * - uid/gid {@link POD_UID} with no passwd entry, no supplementary group but `fsGroup` when given, no capability
 *   (bounding and inheritable sets cleared), `no_new_privs` (`setpriv`);
 * - an empty environment (`env -i`: no HOME, as for an arbitrary uid) plus what the caller names;
 * - new user namespaces refused as the runtime's default seccomp profile refuses them (./no-userns.c, compiled
 *   here with gcc); `gvisor: true` also answers the landlock system calls with ENOSYS, as gVisor does.
 * Needs root (to switch uids), bwrap, setpriv and gcc; {@link podMissing} says which is missing.
 */
import { chmodSync, chownSync, mkdirSync, mkdtempSync } from "node:fs";
import { join } from "node:path";
import { CONF_BASE } from "../helpers/cleanup.ts";
import { toolMissing } from "../helpers/prereq.ts";

/** The uid and gid of the pod's process (distroless' `nonroot`, in no passwd file here). */
export const POD_UID = 65532;

/** Why the pod cannot be made here, or undefined. */
export function podMissing(): string | undefined {
  if (process.platform !== "linux") return "Linux only";
  if (process.getuid?.() !== 0) return "needs root to switch to a uid without a passwd entry";
  return toolMissing("bwrap", "setpriv", "gcc");
}

/** One pod: its folders and the argv prefix that runs a program inside it. */
export interface Pod {
  /** The writable workspace (owned by {@link POD_UID}), at the same path inside and outside. */
  ws: string;
  /** What the pod sees as `/tmp`. */
  tmp: string;
  /** Folder outside the pod for the test's own files (secrets, read-only inside). */
  outside: string;
  /** argv prefix: append the program and its arguments. */
  argv(env?: Record<string, string>, opts?: { gvisor?: boolean; fsGroup?: number }): string[];
}

let noUserns: string | undefined;

/** Compile ./no-userns.c once per test process (into CONF_BASE, removed with it). */
function seccompWrapper(): string {
  if (noUserns !== undefined) return noUserns;
  const out = join(mkdtempSync(join(CONF_BASE, "no-userns-")), "no-userns");
  const r = Bun.spawnSync(["gcc", "-O2", "-o", out, join(import.meta.dir, "no-userns.c")], { stderr: "pipe" });
  if (r.exitCode !== 0) throw new Error(`gcc no-userns.c: ${r.stderr.toString()}`);
  chmodSync(out, 0o755);
  chmodSync(join(out, ".."), 0o755);
  noUserns = out;
  return out;
}

/** Make a pod's folders (under CONF_BASE: outside every writable root of the host's tests). */
export function makePod(): Pod {
  const base = mkdtempSync(join(CONF_BASE, "pod-"));
  chmodSync(base, 0o755);
  const ws = join(base, "workspace");
  const tmp = join(base, "tmp");
  const outside = join(base, "outside");
  mkdirSync(ws);
  chownSync(ws, POD_UID, POD_UID);
  mkdirSync(tmp);
  chmodSync(tmp, 0o1777);
  mkdirSync(outside, { mode: 0o755 });
  const wrapper = seccompWrapper();
  return {
    ws,
    tmp,
    outside,
    argv(env = {}, opts = {}) {
      const groups = opts.fsGroup === undefined ? ["--clear-groups"] : [`--groups=${opts.fsGroup}`];
      return [
        "bwrap",
        ...["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"],
        ...["--bind", ws, ws, "--bind", tmp, "/tmp", "--chdir", ws, "--unshare-pid", "--die-with-parent", "--"],
        "setpriv",
        `--reuid=${POD_UID}`,
        `--regid=${POD_UID}`,
        ...groups,
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--no-new-privs",
        "env",
        "-i",
        "PATH=/usr/local/bin:/usr/bin:/bin",
        ...Object.entries(env).map(([k, v]) => `${k}=${v}`),
        wrapper,
        ...(opts.gvisor === true ? ["--no-landlock"] : []),
      ];
    },
  };
}
