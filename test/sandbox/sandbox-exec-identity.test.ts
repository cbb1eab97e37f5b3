/**
 * Identical enforcement (issue 40): a Landlock call of `serve` through sandbox-exec (patches/sandbox-exec.c) and the
 * same call through the Bun helper (`SHELLMCP_SANDBOX_EXEC=off`) see the same sandbox. For each policy (read-only,
 * workspace-write with the network off and on, restricted reads), two servers with the same HOME (a credential store
 * and a file beside it), CODEX_HOME and workspace run one probe: writes inside, beside and in $TMPDIR and HOME, reads
 * of the hidden store and of what lies beside it, a listing of the store's folder, a TCP connect, a UNIX datagram
 * socket, the fds the shell holds, and its credentials, seccomp and signal state from /proc. The two outputs must be
 * the same line for line.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { landlockAbi } from "../../src/sandbox/linux/landlock.ts";
import { sandboxExecBinary } from "../../src/sandbox/linux/sandbox-exec.ts";
import { BINARY, ensureBinary } from "../helpers/binary.ts";
import { skipWithout } from "../helpers/prereq.ts";
import { startLineRpc } from "../helpers/reference.ts";
import { CONF_BASE } from "../helpers/test-dirs.ts";

const skip = skipWithout(
  "sandbox-exec identity",
  process.platform !== "linux"
    ? "not Linux"
    : "error" in sandboxExecBinary()
      ? "sandbox-exec is not built (scripts/build-sandbox-exec.sh)"
      : landlockAbi() < 6
        ? "Landlock ABI below 6 (calls need the helper's pid namespace)"
        : undefined,
);

const root = realpathSync(mkdtempSync(join(CONF_BASE, "sandbox-exec-identity-")));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const home = join(root, "home");
const codexHome = join(root, "codex-home");
const ws = join(root, "ws");
const beside = join(root, "beside");
const tmp = join(root, "tmp");
for (const d of [join(home, ".ssh"), codexHome, ws, beside, tmp, join(root, "ro")]) mkdirSync(d, { recursive: true });
writeFileSync(join(home, ".ssh", "id_ed25519"), "secret\n");
writeFileSync(join(home, "notes.txt"), "plain\n");
writeFileSync(join(root, "ro", "data"), "data\n");

// Standard error off (a pipeline's getcwd complaints under restricted reads would interleave at random); the two
// lines that report an error send theirs to standard output.
const PROBE = [
  "exec 2>/dev/null",
  `for p in ${ws}/w ${beside}/w ${tmp}/w ${home}/w; do (echo x > $p) 2>/dev/null && echo "write $p: yes" || echo "write $p: no"; done`,
  `cat ${home}/.ssh/id_ed25519 >/dev/null 2>&1 && echo "read store: yes" || echo "read store: no"`,
  `cat ${home}/notes.txt >/dev/null 2>&1 && echo "read beside store: yes" || echo "read beside store: no"`,
  `cat ${root}/ro/data >/dev/null 2>&1 && echo "read ro: yes" || echo "read ro: no"`,
  `ls ${home}/.ssh >/dev/null 2>&1 && echo "list store: yes" || echo "list store: no"`,
  `(exec 3<>/dev/tcp/127.0.0.1/9) 2>&1 | sed 's/^.*: //' | head -1`,
  `python3 -c 'import socket; socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)' 2>&1 | tail -1`,
  `ls -l /proc/self/fd | awk 'NR>1 && index($11, "/proc/") != 1 {t=$11; sub(/:.*/, "", t); print "fd " $9 " " t}'`,
  `grep -E '^(Uid|Gid|Groups|NoNewPrivs|Seccomp|Seccomp_filters|Cap(Inh|Prm|Eff|Bnd|Amb)|Sig(Blk|Ign))' /proc/self/status`,
].join("; ");

const POLICIES: Record<string, object> = {
  "read-only": { type: "read-only" },
  "workspace-write": { type: "workspace-write", exclude_slash_tmp: true, writable_roots: [tmp] },
  "workspace-write, network on": { type: "workspace-write", exclude_slash_tmp: true, network_access: true },
  "workspace-write, restricted reads": {
    type: "workspace-write",
    exclude_slash_tmp: true,
    read_only_access: { type: "restricted", include_platform_defaults: true, readable_roots: [join(root, "ro")] },
  },
};

/** The probe's output under `policy` on a Landlock server, through sandbox-exec or the helper. */
async function probe(policy: object, helper: boolean): Promise<string> {
  ensureBinary();
  const rpc = await startLineRpc([BINARY, "serve", "--sandbox-backend", "landlock"], {
    PATH: "/usr/bin:/bin",
    HOME: home,
    CODEX_HOME: codexHome,
    TMPDIR: tmp,
    ...(helper ? { SHELLMCP_SANDBOX_EXEC: "off" } : {}),
  });
  try {
    const upd = await rpc.request("codex/sandbox-state/update", { sandboxPolicy: policy, sandboxCwd: ws, useLinuxSandboxBwrap: false });
    expect(upd.error).toBeUndefined();
    const r = await rpc.request("tools/call", { name: "shell", arguments: { command: PROBE, workdir: ws, login: false } });
    const text = (JSON.parse((r.result as { content: { text: string }[] }).content[0]!.text) as { output: string }).output;
    for (const f of [ws, beside, tmp, home]) rmSync(join(f, "w"), { force: true });
    return text;
  } finally {
    await rpc.close();
  }
}

describe.skipIf(skip)("sandbox-exec enforces what the helper enforces", () => {
  for (const [name, policy] of Object.entries(POLICIES))
    test(name, async () => {
      const viaExec = await probe(policy, false);
      const viaHelper = await probe(policy, true);
      expect(viaExec.split("\n")).toEqual(viaHelper.split("\n"));
      // The probe ran and saw a sandbox (not an empty or refused call).
      expect(viaExec).toContain("NoNewPrivs:\t1");
      expect(viaExec).toContain("read store: no");
    });
});
