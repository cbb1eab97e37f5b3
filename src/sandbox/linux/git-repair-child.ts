/**
 * The git guard's repairs in a confined child (issue 38 item 1; docs/git-guard.md, "Through what the guard
 * writes"): the server starts this same executable with `--shellmcp-git-repair` (src/main.ts; given to the guard by src/serve/call.ts), only when something is to be undone
 * (rare), and hands it the batch of {@link RepairOp}s as JSON on stdin. The child opens each folder of the batch
 * without following links and checks its identity (../git/repair.ts), then restricts itself with a Landlock ruleset
 * whose only write rules are `path_beneath` rules on those very descriptors (reading stays allowed everywhere),
 * sets no_new_privs, carries out the operations through the descriptors and prints one result per operation as
 * JSON. A race that beats the checks (a folder exchanged with a link between two operations) then still meets the
 * kernel: nothing outside the verified folders can be written.
 *
 * Without Landlock (kernel older than 5.13, or Landlock off) the server carries the batch out in its own process
 * through the same checked descriptors, and logs that once.
 */
import { closeSync, openSync, readFileSync, writeSync } from "node:fs";
import { L, PR, prctl, syscall, closeQuiet } from "../../../ffi/libc.ts";
import { fsRightsForAbi, landlockAbi, READ_RIGHTS, WRITE_RIGHTS } from "./landlock.ts";
import { log } from "../../log.ts";
import { applyOp, DirFds, runRepairs, type RepairOp, type RepairResult } from "../git/repair.ts";

/** The hidden argument that selects this role (src/main.ts). */
export const GIT_REPAIR_FLAG = "--shellmcp-git-repair";

/** An op as it travels on the pipe (bytes as base64). */
type WireOp = Omit<RepairOp, "data"> & { data?: string };

/** What the child prints: one result per op (null: done), or why it did nothing (not confined). */
interface WireAnswer {
  results?: (string | null)[];
  unconfined?: string;
}

let warnedUnconfined = false;

/**
 * Carry out `ops` in order: in a child started by `exe` (argv of this executable; the flag is appended) confined
 * by Landlock to the folders of the batch, or in this process when `exe` is undefined or the kernel has no
 * Landlock (logged once). One result per op: undefined when done, else why not. Never throws; a child that fails
 * leaves every op "not carried out" with the reason (nothing is retried unconfined but a refused confinement).
 */
export function repairBatch(ops: readonly RepairOp[], exe: readonly string[] | undefined): RepairResult[] {
  if (exe === undefined) return runRepairs(ops);
  if (landlockAbi() < 1) return unconfined(ops, "this kernel has no Landlock");
  const wire: WireOp[] = ops.map((op) => ({ ...op, data: op.data === undefined ? undefined : Buffer.from(op.data).toString("base64") }));
  let answer: WireAnswer;
  try {
    const r = Bun.spawnSync([...exe, GIT_REPAIR_FLAG], {
      stdin: Buffer.from(JSON.stringify(wire)),
      stdout: "pipe",
      stderr: "pipe",
      env: { PATH: "/usr/bin:/bin" },
    });
    if (r.exitCode !== 0) throw new Error(`exit ${r.exitCode}: ${r.stderr.toString().slice(0, 300)}`);
    answer = JSON.parse(r.stdout.toString()) as WireAnswer;
  } catch (e) {
    const why = `the confined repair helper failed (${(e as Error).message})`;
    return ops.map(() => why);
  }
  if (answer.unconfined !== undefined) return unconfined(ops, answer.unconfined);
  const results = answer.results ?? [];
  return ops.map((_, i) =>
    typeof results[i] === "string" ? results[i]! : results[i] === null ? undefined : "no answer from the repair helper",
  );
}

/** In this process, through the checked descriptors only (logged once per server). */
function unconfined(ops: readonly RepairOp[], why: string): RepairResult[] {
  if (!warnedUnconfined) {
    warnedUnconfined = true;
    log.warn("git guard: repairs run in the server process, through checked folder descriptors only (no Landlock confinement)", { why });
  }
  return runRepairs(ops);
}

/** Landlock's `LANDLOCK_RULE_PATH_BENEATH`. */
const RULE_PATH_BENEATH = 1;
const O_PATH = 0o10000000;
const O_CLOEXEC = 0o2000000;

/**
 * Restrict this thread (and what it starts) to reading everywhere and writing beneath `dirFds` only; sets
 * no_new_privs. Throws when Landlock refuses.
 */
export function confineToFolders(dirFds: readonly number[]): void {
  const abi = landlockAbi();
  if (abi < 1) throw new Error("this kernel has no Landlock");
  const handled = fsRightsForAbi(abi);
  const attr = new Uint8Array(24); // { u64 handled_access_fs; u64 handled_access_net; u64 scoped }
  new DataView(attr.buffer).setBigUint64(0, BigInt(handled), true);
  const ruleset = syscall("landlock_create_ruleset", L.sys.landlock_create_ruleset!, attr, 24, 0);
  const rule = (fd: number, access: number) => {
    const pb = new Uint8Array(12); // packed { u64 allowed_access; s32 parent_fd }
    const pv = new DataView(pb.buffer);
    pv.setBigUint64(0, BigInt(access & handled), true);
    pv.setInt32(8, fd, true);
    syscall("landlock_add_rule", L.sys.landlock_add_rule!, ruleset, RULE_PATH_BENEATH, pb, 0);
  };
  try {
    const root = openSync("/", O_PATH | O_CLOEXEC);
    try {
      rule(root, READ_RIGHTS);
    } finally {
      closeSync(root);
    }
    for (const fd of dirFds) rule(fd, WRITE_RIGHTS);
    prctl(PR.SET_NO_NEW_PRIVS, 1);
    syscall("landlock_restrict_self", L.sys.landlock_restrict_self!, ruleset, 0);
  } finally {
    closeQuiet(ruleset);
  }
}

/**
 * The child's entry (`shellmcp --shellmcp-git-repair`): ops on stdin, {@link WireAnswer} on stdout; exit 0 unless
 * stdin is not a batch.
 */
export function gitRepairMain(): number {
  const wire = JSON.parse(readFileSync(0, "utf8")) as WireOp[];
  const ops: RepairOp[] = wire.map((w) => ({ ...w, data: w.data === undefined ? undefined : Buffer.from(w.data, "base64") }));
  const fds = new DirFds();
  // Open and check every folder of the batch now: the write rules are these descriptors. A folder that is not
  // there yet (made by a `mkdir` of the batch) lies beneath one that is.
  for (const op of ops) {
    try {
      fds.get(op.dir, op.ident);
    } catch {
      // refused: its ops report why
    }
  }
  let answer: WireAnswer;
  try {
    confineToFolders(fds.all());
    answer = { results: ops.map((op) => applyOp(op, fds) ?? null) };
  } catch (e) {
    answer = { unconfined: (e as Error).message };
  }
  fds.close();
  const out = Buffer.from(JSON.stringify(answer));
  for (let off = 0; off < out.length;) off += writeSync(1, out, off, out.length - off);
  return 0;
}
