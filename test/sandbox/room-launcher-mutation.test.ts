/**
 * Mutation test of the room launcher's wire decoder (patches/room-launcher.c): streams of frames made by the
 * TypeScript encoder (src/sandbox/linux/room-launcher.ts `spawnFrame`, `killFrame`) have bytes flipped, are cut
 * short and are extended, and are fed to the launcher. A reference decoder written here from the wire description
 * (the comment at the top of the C file) says, for each stream, how many spawn frames are well formed before the
 * first malformed one and how the stream ends. The launcher must agree: exactly that many programs spawned (none
 * for a malformed frame), exit 2 with a `room-launcher:` line for a malformed frame or a stream cut inside a frame,
 * exit 0 for a clean end; never a signal, never a sanitizer report. `SHELLMCP_TEST_ROOM_LAUNCHER` names another
 * build (the ASan/UBSan one: scripts/build-sanitized.sh).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { closeSync, openSync } from "node:fs";
import { join } from "node:path";
import { constants as osConstants } from "node:os";
import * as libc from "../../ffi/libc.ts";
import { killFrame, LauncherRecordReader, spawnFrame, type LauncherRecord } from "../../src/sandbox/linux/room-launcher.ts";
import { ROOT } from "../helpers/binary.ts";

const LAUNCHER = process.env.SHELLMCP_TEST_ROOM_LAUNCHER ?? join(ROOT, "dist", "shells-static", `linux-${process.arch}`, "room-launcher");
const MAX_FRAME = 16 * 1024 * 1024;

type Outcome = "malformed" | "truncated" | "clean";

/** Signal numbers to the names Bun reports as a process's `signalCode`. */
const SIGNAL_NAMES = new Map(Object.entries(osConstants.signals).map(([name, n]) => [n as number, name]));

/**
 * What the launcher must make of `bytes` (all `fdsSent` fds arrive with the first byte): how many programs it starts,
 * the outcome, and the signals well-formed kill frames send (`signals`: a program killed by one may end the launcher
 * by the same signal, which it mirrors — a clean outcome, not a crash).
 */
export function referenceDecode(bytes: Uint8Array, fdsSent: number): { spawns: number; outcome: Outcome; signals?: number[] } {
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let off = 0;
  let queued = fdsSent;
  let spawns = 0;
  const signals: number[] = [];
  while (bytes.byteLength - off >= 4) {
    const flen = dv.getUint32(off, true);
    if (flen === 0 || flen > MAX_FRAME) return { spawns, outcome: "malformed" };
    if (bytes.byteLength - off - 4 < flen) return { spawns, outcome: "truncated" };
    const end = off + 4 + flen;
    let p = off + 5;
    let bad = false;
    const u32 = () => {
      if (end - p < 4) {
        bad = true;
        return 0;
      }
      const v = dv.getUint32(p, true);
      p += 4;
      return v;
    };
    const str = () => {
      const nul = bytes.subarray(p, end).indexOf(0);
      if (nul < 0) {
        bad = true;
        return false;
      }
      p += nul + 1;
      return true;
    };
    const strings = (): number | undefined => {
      const n = u32();
      if (bad || n > end - p) {
        bad = true;
        return undefined;
      }
      for (let i = 0; i < n; i++) if (!str()) return undefined;
      return n;
    };
    const op = bytes[off + 4];
    if (op === "S".charCodeAt(0)) {
      u32();
      const nfds = u32();
      if (bad || nfds > 64 || nfds > queued) return { spawns, outcome: "malformed" };
      for (let i = 0; i < nfds; i++) {
        const d = u32() | 0;
        if (d < 0 || d > 1023) return { spawns, outcome: "malformed" };
      }
      str();
      str();
      const argc = strings();
      const envc = bad ? undefined : strings();
      if (bad || argc === undefined || envc === undefined || argc === 0 || p !== end) return { spawns, outcome: "malformed" };
      queued -= nfds;
      spawns++;
    } else if (op === "K".charCodeAt(0)) {
      u32();
      const sig = u32() | 0;
      if (bad || sig < 0 || sig > 64 || p !== end) return { spawns, outcome: "malformed" };
      if (sig !== 0) signals.push(sig);
    } else return { spawns, outcome: "malformed" };
    off = end;
  }
  return { spawns, outcome: off === bytes.byteLength ? "clean" : "truncated", ...(signals.length > 0 ? { signals } : {}) };
}

const live: { proc: ReturnType<typeof Bun.spawn>; fd: number }[] = [];
afterAll(() => {
  for (const l of live) {
    libc.closeQuiet(l.fd);
    l.proc.kill(9);
  }
});

/**
 * Feed `bytes` (with `fds` on its first byte) to a new launcher and read its records: until it closes its end
 * (`"eof"`: a malformed frame ends it by itself), or until `exits` programs have exited, then close ours.
 */
async function feed(
  bytes: Uint8Array,
  fds: number[],
  waitFor: number | "eof",
): Promise<{ spawned: number; status: number | null; signal: string | null; stderr: string }> {
  const [mine, theirs] = libc.socketpair(libc.SOCK.AF_UNIX, libc.SOCK.SOCK_STREAM | libc.SOCK.SOCK_CLOEXEC);
  const proc = Bun.spawn([LAUNCHER], {
    stdio: ["ignore", "ignore", "pipe", theirs],
    env: {
      ...process.env,
      ASAN_OPTIONS: "detect_leaks=0:exitcode=66:allow_user_segv_handler=1",
      UBSAN_OPTIONS: "print_stacktrace=1:halt_on_error=1",
    },
  });
  libc.close(theirs);
  const entry = { proc, fd: mine };
  live.push(entry);
  let off = 0;
  try {
    while (off < bytes.byteLength) off += libc.sendmsg(mine, bytes.subarray(off), off === 0 ? fds : []);
  } catch {
    // the launcher died first (a malformed frame): what it did is judged below
  }
  const reader = new LauncherRecordReader();
  const records: LauncherRecord[] = [];
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    if (waitFor !== "eof" && records.filter((r) => r.kind === "exited").length >= waitFor) break;
    const ready = libc.poll([{ fd: mine, events: libc.POLL.IN }], 20);
    if (ready[0] === 0) {
      await Bun.sleep(0);
      continue;
    }
    const r = libc.recvmsg(mine, 4096);
    if (r.bytes.byteLength === 0) break;
    records.push(...reader.push(r.bytes));
  }
  libc.closeQuiet(mine);
  const status = await Promise.race([proc.exited, Bun.sleep(10_000).then(() => null)]);
  if (status === null) proc.kill(9);
  live.splice(live.indexOf(entry), 1);
  return {
    spawned: records.filter((r) => r.kind === "spawned").length,
    status: proc.signalCode !== null ? null : status,
    signal: proc.signalCode === null ? null : String(proc.signalCode),
    stderr: await new Response(proc.stderr as ReadableStream).text(),
  };
}

/** A small deterministic PRNG (xorshift32): the same mutations on every run. */
function rng(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 0x100000000;
  };
}

function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.byteLength, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.byteLength;
  }
  return out;
}

/** The valid streams every mutation starts from (each spawn carries one fd, for stdout). */
const BASES: { name: string; bytes: Uint8Array; fds: number }[] = [
  { name: "spawn", bytes: spawnFrame(1, [1], "/bin/true", "/", ["true", "x"], ["A=b"]), fds: 1 },
  { name: "kill", bytes: killFrame(7, 15), fds: 0 },
  {
    name: "spawn+kill+spawn",
    bytes: concat(spawnFrame(1, [1], "/bin/true", "/", ["true"], []), killFrame(1, 9), spawnFrame(2, [], "/bin/true", "/", ["t"], ["E=1"])),
    fds: 1,
  },
];

/** Every mutation of `b`: each byte flipped (all bits, lowest bit), cut at every length, extended (bytes after, inside the length too). */
function mutations(b: Uint8Array, seed: number): Uint8Array[] {
  const out: Uint8Array[] = [];
  const rand = rng(seed);
  for (let i = 0; i < b.byteLength; i++)
    for (const mask of [0xff, 0x01, 0x80]) {
      const m = b.slice();
      m[i]! ^= mask;
      out.push(m);
    }
  for (let n = 1; n < b.byteLength; n++) out.push(b.slice(0, n));
  for (let k = 1; k <= 6; k++) {
    const extra = Uint8Array.from({ length: k }, () => Math.floor(rand() * 256));
    out.push(concat(b, extra));
    // inside the first frame's length: bytes after its last field
    const first = new DataView(b.buffer, b.byteOffset).getUint32(0, true);
    const firstEnd = 4 + first;
    const inside = concat(b.subarray(0, firstEnd), extra, b.subarray(firstEnd));
    new DataView(inside.buffer).setUint32(0, first + k, true);
    out.push(inside);
  }
  for (let i = 0; i < 40; i++) {
    const m = b.slice();
    const at = Math.floor(rand() * b.byteLength);
    const v = new DataView(m.buffer);
    if (at + 4 <= m.byteLength) v.setUint32(at, [0, 0xffffffff, 0x7fffffff, 1024, 65, 64, MAX_FRAME + 1][i % 7]!, true);
    out.push(m);
  }
  return out;
}

describe("room launcher: mutated frames", () => {
  test("the reference decoder accepts the unmutated streams", () => {
    for (const b of BASES)
      expect(referenceDecode(b.bytes, b.fds)).toMatchObject({
        spawns: b.name === "kill" ? 0 : b.name === "spawn" ? 1 : 2,
        outcome: "clean",
      });
  });

  for (const [k, base] of BASES.entries()) {
    test(`${base.name}: never a crash, never a program from a malformed frame, a clear exit`, async () => {
      const all = mutations(base.bytes, 0x5eed + k);
      const failures: string[] = [];
      const outcomes = { malformed: 0, truncated: 0, clean: 0 };
      const batch = 4;
      for (let i = 0; i < all.length; i += batch) {
        await Promise.all(
          all.slice(i, i + batch).map(async (bytes) => {
            const ref = referenceDecode(bytes, base.fds);
            outcomes[ref.outcome]++;
            const fds: number[] = [];
            for (let f = 0; f < base.fds; f++) fds.push(openSync("/dev/null", "w"));
            let got;
            try {
              got = await feed(bytes, fds, ref.outcome === "malformed" ? "eof" : ref.spawns);
            } finally {
              for (const fd of fds) closeSync(fd);
            }
            const hex = Buffer.from(bytes).toString("hex");
            const want = ref.outcome === "clean" ? 0 : 2;
            // A program a well-formed kill frame killed may end the launcher by the same signal (it mirrors its child).
            const mirrored = got.signal !== null && (ref.signals ?? []).some((n) => SIGNAL_NAMES.get(n) === got.signal);
            if ((got.signal !== null && !mirrored) || /AddressSanitizer|runtime error|LeakSanitizer/.test(got.stderr))
              failures.push(`${hex}: crashed (${got.signal ?? ""}) ${got.stderr.slice(0, 400)}`);
            else if (got.status !== want)
              failures.push(`${hex}: exit ${got.status}, expected ${want} (${ref.outcome}) ${got.stderr.slice(0, 200)}`);
            else if (got.spawned !== ref.spawns)
              failures.push(`${hex}: ${got.spawned} programs spawned, expected ${ref.spawns} (${ref.outcome})`);
            else if (want === 2 && !got.stderr.includes("room-launcher: ")) failures.push(`${hex}: no reason on stderr`);
          }),
        );
      }
      expect(failures).toEqual([]);
      // The mutations reach every outcome (a test whose cases are all alike proves little).
      expect(outcomes.malformed).toBeGreaterThan(10);
      expect(outcomes.truncated).toBeGreaterThan(5);
    }, 300_000);
  }
});
