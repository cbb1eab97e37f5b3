/**
 * sandbox-exec (patches/sandbox-exec.c, issue 40): the plan the server makes (src/sandbox/linux/sandbox-exec.ts) is
 * enforced; a malformed plan is refused (exit 101, one `malformed plan` line, the command never run) — hand-made
 * corruptions of each field, then a mutation sweep (every truncation, extensions, bytes flipped across the header and
 * rules), judged against a reference reader written here from the wire description at the top of the C file; and a
 * Landlock call of `serve` starts no Bun between the server and the shell, judged from /proc by this process.
 * `SHELLMCP_TEST_SANDBOX_EXEC` names another build (the ASan/UBSan one: scripts/build-sanitized.sh).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, realpathSync, rmSync } from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { bytesPipe } from "../../src/sandbox/bytes-pipe.ts";
import * as libc from "../../ffi/libc.ts";
import { parseSandboxPolicy } from "../../src/sandbox/policy.ts";
import { encodeExecPlan, planLandlockExec, PLAN_HEADER_BYTES, type ExecPlan } from "../../src/sandbox/linux/sandbox-exec.ts";
import { landlockAbi } from "../../src/sandbox/linux/landlock.ts";
import { BINARY, ensureBinary, homeDir, ROOT } from "../helpers/binary.ts";
import { startLineRpc } from "../helpers/reference.ts";
import { CONF_BASE } from "../helpers/test-dirs.ts";
import { skipWithout } from "../helpers/prereq.ts";

const EXEC = process.env.SHELLMCP_TEST_SANDBOX_EXEC ?? join(ROOT, "dist", "shells-static", `linux-${process.arch}`, "sandbox-exec");
const PLAN_FD = 4;
const skip = skipWithout(
  "sandbox-exec",
  process.platform !== "linux"
    ? "not Linux"
    : !existsSync(EXEC)
      ? `${EXEC} is not built (scripts/build-sandbox-exec.sh)`
      : landlockAbi() < 1
        ? "no Landlock on this kernel"
        : undefined,
);
const skipServe = skipWithout(
  "a Landlock call of serve without the helper",
  process.platform !== "linux"
    ? "not Linux"
    : landlockAbi() < 6
      ? "Landlock ABI below 6 (calls need the helper's pid namespace)"
      : undefined,
);

// Workspaces outside /tmp and $TMPDIR (writable roots of workspace-write).
const root = realpathSync(mkdtempSync(join(CONF_BASE, "sandbox-exec-")));
const ws = join(root, "ws");
const outside = join(root, "outside");
mkdirSync(ws);
mkdirSync(outside);
afterAll(() => rmSync(root, { recursive: true, force: true }));

const env = { PATH: "/usr/bin:/bin", HOME: join(root, "home"), TMPDIR: join(ws, "tmp") };

/** The server's plan for workspace-write on `ws` (network off). */
function wsPlan(): ExecPlan {
  const p = planLandlockExec({ policy: parseSandboxPolicy({ type: "workspace-write", exclude_slash_tmp: true }), policyCwd: ws, env });
  if ("helper" in p) throw new Error(`no plan: ${p.helper}`);
  return p;
}

/** Run sandbox-exec with `plan` on fd 4 and `command`. */
async function run(plan: Uint8Array, command: string[]): Promise<{ code: number | null; signal: unknown; out: string; err: string }> {
  const fd = bytesPipe(plan);
  try {
    const p = Bun.spawn([EXEC, "--plan-fd", String(PLAN_FD), "--", ...command], {
      stdio: ["ignore", "pipe", "pipe", "ignore", fd],
      env,
      cwd: ws,
    });
    const [out, err] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text()]);
    await p.exited;
    return { code: p.exitCode, signal: p.signalCode, out, err };
  } finally {
    libc.closeQuiet(fd);
  }
}

/** A plan of its parts, some written as raw bytes (for corruptions the encoder cannot make). */
function raw(parts: (number | bigint | Uint8Array)[][]): Uint8Array {
  const chunks: Uint8Array[] = [];
  for (const [kind, ...vals] of parts)
    for (const v of vals) {
      if (v instanceof Uint8Array) chunks.push(v);
      else {
        const b = new Uint8Array(kind === 8 ? 8 : 4);
        const dv = new DataView(b.buffer);
        if (kind === 8) dv.setBigUint64(0, BigInt(v), true);
        else dv.setUint32(0, Number(v) >>> 0, true);
        chunks.push(b);
      }
    }
  const out = new Uint8Array(chunks.reduce((n, c) => n + c.byteLength, 0));
  let o = 0;
  for (const c of chunks) out.set(c, (o += c.byteLength) - c.byteLength);
  return out;
}

/**
 * Reference reader (from the comment at the top of patches/sandbox-exec.c): whether `b` is exactly one well-formed
 * version-1 plan. Bounds: 16 MiB, ABI 1–64, fs rights within 0xffff, net within 3, scopes within 3, at most 65536 path
 * rules (paths 1–4095 bytes, absolute, no NUL) and 64 port rules (ports ≤ 65535), each rule's rights non-empty and
 * within the handled set, port rules only with TCP connect handled, a seccomp program of 1–4096 instructions exactly
 * when flag 8 is set, flag 1 always, no unknown flag, no Landlock field without flag 2, nothing after the end.
 */
function wellFormed(b: Uint8Array): boolean {
  if (b.byteLength > 1 << 24) return false;
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  let o = 0;
  const u32 = () => (o + 4 > b.byteLength ? undefined : ((o += 4), dv.getUint32(o - 4, true)));
  const u64 = () => (o + 8 > b.byteLength ? undefined : ((o += 8), dv.getBigUint64(o - 8, true)));
  const [magic, version, flags, abi] = [u32(), u32(), u32(), u32()];
  const [fs, net, scoped] = [u64(), u64(), u64()];
  const [np, nn, nb] = [u32(), u32(), u32()];
  if (nb === undefined) return false;
  if (magic !== 0x31505853 || version !== 1) return false;
  if ((flags! & ~63) !== 0 || (flags! & 1) === 0) return false;
  if (flags! & 2) {
    if (abi! < 1 || abi! > 64 || fs === 0n || (fs! & ~0xffffn) !== 0n || (net! & ~3n) !== 0n || (scoped! & ~3n) !== 0n) return false;
    if (np! > 65536 || nn! > 64 || (nn! > 0 && (net! & 2n) === 0n)) return false;
  } else if (abi !== 0 || fs !== 0n || net !== 0n || scoped !== 0n || np !== 0 || nn !== 0) return false;
  if (flags! & 8) {
    if (nb === 0 || nb % 8 !== 0 || nb / 8 > 4096) return false;
  } else if (nb !== 0) return false;
  for (let i = 0; i < np!; i++) {
    const access = u64();
    const n = u32();
    if (n === undefined || access === undefined || access === 0n || (access! & ~fs!) !== 0n || n === 0 || n > 4095 || o + n > b.byteLength)
      return false;
    if (b[o] !== 0x2f || b.subarray(o, o + n).includes(0)) return false;
    o += n;
  }
  for (let i = 0; i < nn!; i++) {
    const access = u64();
    const port = u64();
    if (port === undefined || access === undefined || access === 0n || (access! & ~net!) !== 0n || port > 65535n) return false;
  }
  return o + nb === b.byteLength;
}

const SAN = /AddressSanitizer|runtime error:|LeakSanitizer/;

describe.skipIf(skip)("sandbox-exec", () => {
  test("the server's plan is enforced: the workspace is writable, the folder beside it is not, the shell is confined", async () => {
    const r = await run(encodeExecPlan(wsPlan()), [
      "/bin/sh",
      "-c",
      `touch ${ws}/in; touch ${outside}/out 2>/dev/null || echo refused; grep -E '^(NoNewPrivs|Seccomp|Cap[A-Za-z]+):' /proc/self/status`,
    ]);
    expect({ code: r.code, err: r.err }).toEqual({ code: 0, err: "" });
    expect(r.out).toContain("refused");
    expect(r.out).toMatch(/NoNewPrivs:\s+1/);
    expect(r.out).toMatch(/Seccomp:\s+2/);
    for (const set of ["CapInh", "CapPrm", "CapEff", "CapAmb"]) expect(r.out).toMatch(new RegExp(`${set}:\\s+0000000000000000`));
    // The bounding set is emptied only where the kernel allows it (CAP_SETPCAP: root); a non-root user's stays full,
    // and with no_new_privs and empty permitted and inheritable sets nothing can be gained from it.
    if (process.getuid?.() === 0) expect(r.out).toMatch(/CapBnd:\s+0000000000000000/);
    expect(existsSync(join(ws, "in"))).toBe(true);
    expect(existsSync(join(outside, "out"))).toBe(false);
    rmSync(join(ws, "in"));
  });

  test("a command that cannot be found: 127 with a shell-style line, as the helper", async () => {
    const r = await run(encodeExecPlan(wsPlan()), ["no-such-command-here"]);
    expect({ code: r.code, err: r.err }).toEqual({ code: 127, err: "no-such-command-here: command not found\n" });
  });

  const good = () => encodeExecPlan(wsPlan());
  const bpf = new Uint8Array(8); // one instruction: RET ALLOW is not needed, the plan is refused before
  const header = (o: Partial<Record<string, number | bigint>>) => [
    [4, o.magic ?? 0x31505853, o.version ?? 1, o.flags ?? 31, o.abi ?? 1],
    [8, o.fs ?? 0x1fff, o.net ?? 0, o.scoped ?? 0],
    [4, o.np ?? 0, o.nn ?? 0, o.nb ?? 8],
  ];
  const path = (s: string) => new TextEncoder().encode(s);
  const CASES: Record<string, Uint8Array> = {
    empty: new Uint8Array(0),
    "cut inside the header": good().subarray(0, 10),
    "bad magic": raw([...header({ magic: 0x31505854 }), [0, bpf]]),
    "version 2": raw([...header({ version: 2 }), [0, bpf]]),
    "unknown flag": raw([...header({ flags: 31 | 64 }), [0, bpf]]),
    "no no_new_privs": raw([...header({ flags: 30 }), [0, bpf]]),
    "ABI 0 with Landlock": raw([...header({ abi: 0 }), [0, bpf]]),
    "ABI 65": raw([...header({ abi: 65 }), [0, bpf]]),
    "no handled fs rights": raw([...header({ fs: 0 }), [0, bpf]]),
    "an unknown fs right": raw([...header({ fs: 0x1ffff }), [0, bpf]]),
    "an unknown net right": raw([...header({ net: 4 }), [0, bpf]]),
    "an unknown scope": raw([...header({ scoped: 4 }), [0, bpf]]),
    "Landlock fields without the flag": raw([...header({ flags: 1 | 8, abi: 1 }), [0, bpf]]),
    "4097 path rules": raw([...header({ np: 4097 }), [0, bpf]]),
    "65 port rules": raw([...header({ nn: 65, net: 3 }), [0, bpf]]),
    "port rules without TCP connect handled": raw([...header({ nn: 1, net: 1 }), [8, 1, 80], [0, bpf]]),
    "a seccomp program of 7 bytes": raw([...header({ nb: 7 }), [0, new Uint8Array(7)]]),
    "a seccomp program of 4097 instructions": raw([...header({ nb: 8 * 4097 }), [0, new Uint8Array(8 * 4097)]]),
    "no seccomp program with the flag": raw([...header({ nb: 0 })]),
    "a seccomp program without the flag": raw([...header({ flags: 1 | 2 | 4 | 16 }), [0, bpf]]),
    "a relative path": raw([...header({ np: 1 }), [8, 1], [4, 3], [0, path("etc"), bpf]]),
    "a NUL in a path": raw([...header({ np: 1 }), [8, 1], [4, 4], [0, path("/e\0c"), bpf]]),
    "an empty path": raw([...header({ np: 1 }), [8, 1], [4, 0], [0, bpf]]),
    "a path of 4096 bytes": raw([...header({ np: 1 }), [8, 1], [4, 4096], [0, path(`/${"a".repeat(4095)}`), bpf]]),
    "a path longer than the plan": raw([...header({ np: 1 }), [8, 1], [4, 100], [0, path("/etc"), bpf]]),
    "a rule with no rights": raw([...header({ np: 1 }), [8, 0], [4, 4], [0, path("/etc"), bpf]]),
    "a rule with a right not handled": raw([...header({ np: 1 }), [8, 0x2000], [4, 4], [0, path("/etc"), bpf]]),
    "port 65536": raw([...header({ nn: 1, net: 3 }), [8, 2, 65536], [0, bpf]]),
    "bytes after the end": raw([[0, good(), new Uint8Array([0])]]),
  };
  for (const [name, bytes] of Object.entries(CASES))
    test(`a malformed plan is refused: ${name}`, async () => {
      expect(wellFormed(bytes)).toBe(false);
      const r = await run(bytes, ["/bin/echo", "ran"]);
      expect({ code: r.code, signal: r.signal, out: r.out }).toEqual({ code: 101, signal: null, out: "" });
      expect(r.err).toMatch(/^shellmcp sandbox-exec: malformed plan: .*\n$/);
    });

  test("no plan on the fd, or a bad command line: refused, nothing run", async () => {
    const noFd = Bun.spawn([EXEC, "--plan-fd", "9", "--", "/bin/echo", "ran"], { stdio: ["ignore", "pipe", "pipe"], env });
    expect([await new Response(noFd.stdout).text(), await noFd.exited]).toEqual(["", 101]);
    for (const argv of [[], ["--plan-fd", "x", "--", "/bin/echo"], ["--plan-fd", "4", "/bin/echo"], ["--plan-fd", "4", "--"]]) {
      const p = Bun.spawn([EXEC, ...argv], { stdio: ["ignore", "pipe", "pipe"], env });
      expect([argv, await new Response(p.stdout).text(), await p.exited]).toEqual([argv, "", 101]);
    }
  });

  test("mutation sweep: every truncation, extensions and flipped bytes are refused or applied, never half-run", async () => {
    const plan = good();
    const bpfStart = plan.byteLength - (wsPlan().seccomp?.byteLength ?? 0);
    const mutants: Uint8Array[] = [];
    for (let n = 0; n < plan.byteLength; n++) mutants.push(plan.subarray(0, n));
    for (const extra of [1, 7, 8, 64]) mutants.push(raw([[0, plan, new Uint8Array(extra)]]));
    for (let i = 0; i < bpfStart; i++)
      for (const x of [0x01, 0x80, 0xff]) {
        const m = plan.slice();
        m[i]! ^= x;
        mutants.push(m);
      }
    expect(bpfStart).toBeGreaterThan(PLAN_HEADER_BYTES);
    const seen = { refused: 0, ran: 0, applyRefused: 0 };
    for (const m of mutants) {
      const r = await run(m, ["/bin/echo", "ran"]);
      const what = { len: m.byteLength, code: r.code, signal: r.signal, out: r.out, err: r.err };
      expect(r.signal === null && !SAN.test(r.err) ? "no crash" : what).toBe("no crash");
      if (!wellFormed(m)) {
        expect(r.code === 101 && r.out === "" && /malformed plan/.test(r.err) ? "refused" : what).toBe("refused");
        seen.refused++;
      } else if (r.code === 0) {
        expect(r.out).toBe("ran\n");
        seen.ran++;
      } else {
        // Well formed but not appliable as it stands (a flipped ABI or mask the kernel refuses, a right the exec
        // needs taken away): refused before the command, or the command refused by the sandbox.
        expect([101, 126, 127].includes(r.code!) && r.out === "" ? "refused" : what).toBe("refused");
        seen.applyRefused++;
      }
    }
    expect(seen.refused).toBeGreaterThan(plan.byteLength);
    expect(seen.ran).toBeGreaterThan(0);
  }, 120_000);
});

/** The parent pid of `pid` (/proc/PID/stat, after the command name). */
function ppidOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
}

/** What {@link exeOf} answers for a process whose executable link this user may not read (a non-dumpable one). */
const HIDDEN = "(not readable: a non-dumpable process)";

/** The executable of `pid` (/proc/PID/exe), or {@link HIDDEN} when the kernel refuses (EACCES: needs CAP_SYS_PTRACE). */
function exeOf(pid: number): string {
  try {
    return readlinkSync(`/proc/${pid}/exe`);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "EACCES") return HIDDEN;
    throw e;
  }
}

/** Resident set of `pid` in KiB (/proc/PID/status VmRSS). */
function rssKiB(pid: number): number {
  return Number(/^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1]);
}

/** Minor page faults of `pid` since its fork (/proc/PID/stat field 10): kept across execve. */
function minorFaults(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[7]);
}

describe.skipIf(skipServe)("a Landlock call of serve", () => {
  test("starts no Bun between the server and the shell, judged from /proc", async () => {
    const exe = realpathSync(ensureBinary());
    const home = homeDir();
    const w = realpathSync(mkdtempSync(join(CONF_BASE, "sandbox-exec-ws-")));
    const rpc = await startLineRpc([BINARY, "serve", "--sandbox-backend", "landlock"], {
      PATH: "/usr/bin:/bin",
      HOME: home,
      CODEX_HOME: home,
    });
    try {
      await rpc.request("codex/sandbox-state/update", {
        sandboxPolicy: { type: "workspace-write" },
        sandboxCwd: w,
        useLinuxSandboxBwrap: false,
      });
      for (const f of ["pid", "go"]) expect(Bun.spawnSync(["mkfifo", join(w, f)]).exitCode).toBe(0);
      const call = rpc.request("tools/call", {
        name: "shell",
        arguments: { command: `echo $$ > pid; read x < go; echo done`, workdir: w, login: false },
      });
      const shell = Number((await readFile(join(w, "pid"), "utf8")).trim());
      // From the shell up to the server: every process's executable, as the kernel names it. The lifeline guard
      // between them makes itself non-dumpable, so a user other than root cannot read its link: for such a process
      // its resident set stands in (a Bun runtime holds tens of MiB; the guard, a small static C program, well
      // under one), from /proc/PID/status, which anyone may read.
      const chain: { pid: number; exe: string }[] = [];
      for (let p = shell; p !== rpc.proc.pid && p > 1; p = ppidOf(p)) chain.push({ pid: p, exe: exeOf(p) });
      const hidden = chain.filter((c) => c.exe === HIDDEN).map((c) => ({ pid: c.pid, smallRss: rssKiB(c.pid) < 8 * 1024 }));
      const faults = minorFaults(shell);
      await writeFile(join(w, "go"), "x\n");
      const r = (await call).result as { content: { text: string }[] };
      expect(r.content[0]!.text).toContain("done");
      expect(chain.length).toBeGreaterThan(0);
      expect(chain.filter((c) => c.exe === exe)).toEqual([]);
      expect(hidden.filter((h) => !h.smallRss)).toEqual([]);
      if (process.getuid?.() === 0) expect(hidden).toEqual([]);
      // The shell's process was never a Bun runtime before it exec'd the shell: a Bun start (the helper) faults in
      // thousands of pages (about 1900 measured), sandbox-exec and the shell's own start about a hundred.
      expect({ faults, below: faults < 1000 }).toEqual({ faults, below: true });
    } finally {
      await rpc.close();
      rmSync(w, { recursive: true, force: true });
      rmSync(home, { recursive: true, force: true });
    }
  });
});
