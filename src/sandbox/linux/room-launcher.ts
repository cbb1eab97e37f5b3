/**
 * Kept rooms: one escalation room per call and set of walls, reused by every escalated program of that call that
 * needs the same walls (issue 21's cost target). Building a room is most of an escalated exec's cost (a bubblewrap
 * with its namespaces and mounts, ~4 ms; a Landlock helper, a whole runtime start); a kept room is built once, with
 * the room launcher inside (patches/room-launcher.c, a small static program carried in the executable), and each
 * program after that costs a fork and an exec in it.
 *
 * Walls are the same as a room of its own (./room.ts builds both): the key of a room ({@link PreparedRoom}) is its
 * whole plan, so two programs share a room only when each would have got exactly that room. What changes:
 * - the room lives until its call ends (the escalation worker closes it when the call's listener closes, and
 *   kills it with the call), not until its program ends; a process an escalated program left behind is killed
 *   as soon as no program of the room runs (the launcher is the room's subreaper; in a bubblewrap room,
 *   `kill(-1, SIGKILL)` inside its pid namespace);
 * - the git control files that must not appear are checked after each program, and once more when the room ends.
 *
 * The launcher's wire (frames to it, 12-byte records back) is described in patches/room-launcher.c; this module
 * encodes and decodes it, and finds the launcher: beside a from-source run in `dist/shells-static/<platform>/`,
 * or the copy the compiled executable carries, installed to a checked folder like the portable shells
 * (src/carried/portable-shells.ts). Without one (a build that carries none), every program gets a room of its own.
 * `SHELLMCP_ROOM_LAUNCHER=off` asks for that too (the benches compare both).
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { log } from "../../log.ts";
import { IS_COMPILED } from "../../self.ts";
import { embeddedShell, installPortableShell } from "../../carried/portable-shells.ts";
import { landlockAbi } from "./landlock.ts";

/**
 * Kept rooms one call may hold at once. The key is the room's plan, which follows the repository a program runs
 * in: without a bound, a call that creates `.git` folders and enters each would keep a room (three processes, two
 * fds of the shared escalation worker, its mount points) per folder until it ends. Past the bound, a program gets
 * a room of its own, which ends with it.
 */
export const MAX_KEPT_ROOMS_PER_CALL = 4;

/** The fd number of the worker's socket in the launcher. */
export const LAUNCHER_SOCKET_FD = 3;
/** Largest frame the launcher accepts (bytes after the length). */
export const MAX_LAUNCHER_FRAME = 16 * 1024 * 1024;
/** Most fds one spawn frame may carry (the launcher's limit). */
export const MAX_LAUNCHER_FDS = 64;

let found: { path: string | undefined; error?: string } | undefined;

/**
 * Path of the room launcher binary (patches/room-launcher.c), whatever `SHELLMCP_ROOM_LAUNCHER` says: it is also the
 * lifeline guard of every process the server starts (src/sandbox/linux/lifeline.ts). Found once per thread: compiled → the
 * carried copy, installed to a checked folder outside every writable root; from source →
 * `dist/shells-static/<platform>/room-launcher` when built. `{ error }` says why there is none (not Linux, a build
 * that carries none, a failure to install).
 */
export function launcherBinary(): { path: string } | { error: string } {
  if (found === undefined) {
    let path: string | undefined;
    let error: string | undefined;
    if (process.platform !== "linux") error = "not Linux";
    else if (IS_COMPILED) {
      const bytes = embeddedShell("room-launcher");
      if (bytes === undefined) error = "this build carries no room launcher";
      else
        try {
          path = installPortableShell("room-launcher", bytes);
        } catch (e) {
          error = `cannot install the room launcher: ${(e as Error).message}`;
        }
    } else {
      const p = join(import.meta.dir, "..", "..", "..", "dist", "shells-static", `linux-${process.arch}`, "room-launcher");
      if (existsSync(p)) path = p;
      else error = `${p} is not built (scripts/build-room-launcher.sh)`;
    }
    found = { path, error };
  }
  return found.path !== undefined ? { path: found.path } : { error: found.error ?? "no room launcher" };
}

let warned = false;

/**
 * Path of the room launcher to start kept rooms with, or undefined when there is none (each program then gets a
 * room of its own): `SHELLMCP_ROOM_LAUNCHER=off` → none; else {@link launcherBinary} (a failure to install is
 * logged, and means none).
 */
export function roomLauncherPath(): string | undefined {
  if (process.env.SHELLMCP_ROOM_LAUNCHER === "off") return undefined;
  const b = launcherBinary();
  if ("error" in b) {
    if (process.platform === "linux" && !warned)
      log.warn("no room launcher: each escalated program gets a room of its own", { error: b.error });
    warned = true;
    return undefined;
  }
  return b.path;
}

let landlockScopes: boolean | undefined;

/**
 * Whether rooms of `kind` may be kept. A kept room's programs must not reach their launcher: under bubblewrap the
 * launcher is not dumpable and the room has no capabilities; under Landlock the launcher runs with the user's
 * (root's: CAP_SYS_PTRACE) credentials in the programs' pid namespace, and only the programs' nested domain with
 * ABI 6's signal scope keeps them from killing or stopping it (or, for root, from taking its socket). Below ABI 6
 * each Landlock program gets a room of its own (the kernel is probed once per process).
 */
export function keepsRooms(kind: "bwrap" | "landlock"): boolean {
  if (kind === "bwrap") return true;
  landlockScopes ??= landlockAbi() >= 6;
  return landlockScopes;
}

/** The launcher's argv inside a room: `--contained` when the room is a pid namespace of its own. */
export function launcherArgv(launcher: string, contained: boolean): string[] {
  return contained ? [launcher, "--contained"] : [launcher];
}

const enc = new TextEncoder();

/** Frame: u32 length (LE) of what follows, then `op` and `body`. */
function frame(op: "S" | "K", parts: Uint8Array[]): Uint8Array {
  const len = 1 + parts.reduce((n, p) => n + p.byteLength, 0);
  if (len > MAX_LAUNCHER_FRAME) throw new RangeError(`room launcher frame of ${len} bytes (at most ${MAX_LAUNCHER_FRAME})`);
  const out = new Uint8Array(4 + len);
  new DataView(out.buffer).setUint32(0, len, true);
  out[4] = op.charCodeAt(0);
  let off = 5;
  for (const p of parts) {
    out.set(p, off);
    off += p.byteLength;
  }
  return out;
}

function u32s(...v: number[]): Uint8Array {
  const b = new Uint8Array(4 * v.length);
  const dv = new DataView(b.buffer);
  v.forEach((x, i) => dv.setUint32(4 * i, x >>> 0, true));
  return b;
}

function cstr(s: string): Uint8Array {
  if (s.includes("\0")) throw new RangeError("a string for the room launcher holds a NUL byte");
  return enc.encode(`${s}\0`);
}

/**
 * The spawn frame for program `id`: `path` exec'd with `argv` (argv[0] exactly) and `env` (KEY=VALUE) in `cwd`,
 * with the frame's fds (sent with its first byte, in order) on `dests`. Throws `RangeError` for a NUL in a string,
 * more than {@link MAX_LAUNCHER_FDS} fds, or a frame over {@link MAX_LAUNCHER_FRAME}.
 */
export function spawnFrame(
  id: number,
  dests: readonly number[],
  path: string,
  cwd: string,
  argv: readonly string[],
  env: readonly string[],
): Uint8Array {
  if (dests.length > MAX_LAUNCHER_FDS) throw new RangeError(`${dests.length} fds for the room launcher (at most ${MAX_LAUNCHER_FDS})`);
  return frame("S", [
    u32s(id, dests.length, ...dests),
    cstr(path),
    cstr(cwd),
    u32s(argv.length),
    ...argv.map(cstr),
    u32s(env.length),
    ...env.map(cstr),
  ]);
}

/** The kill frame: program `id`'s process group gets `signal`. */
export function killFrame(id: number, signal: number): Uint8Array {
  return frame("K", [u32s(id, signal)]);
}

/** A record from the launcher: `spawned` (value: pid in the room, or −errno) or `exited` (value: wait status). */
export interface LauncherRecord {
  kind: "spawned" | "exited";
  id: number;
  value: number;
}

/** Splits the launcher's byte stream into {@link LauncherRecord}s (a read may end mid-record). */
export class LauncherRecordReader {
  private rest = new Uint8Array(0);

  /** Add bytes read from the socket; returns the records they complete. Throws `RangeError` for an unknown kind. */
  push(bytes: Uint8Array): LauncherRecord[] {
    const buf = this.rest.byteLength === 0 ? bytes : concat(this.rest, bytes);
    const dv = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
    const out: LauncherRecord[] = [];
    let off = 0;
    for (; buf.byteLength - off >= 12; off += 12) {
      const k = dv.getUint32(off, true);
      if (k !== 1 && k !== 2) throw new RangeError(`room launcher: unknown record kind ${k}`);
      out.push({ kind: k === 1 ? "spawned" : "exited", id: dv.getUint32(off + 4, true), value: dv.getInt32(off + 8, true) });
    }
    this.rest = buf.slice(off);
    return out;
  }
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const c = new Uint8Array(a.byteLength + b.byteLength);
  c.set(a);
  c.set(b, a.byteLength);
  return c;
}

/** A wait status as a shell reports it: the exit code, or 128 + the signal that ended the program. */
export function exitCodeOf(status: number): number {
  const sig = status & 0x7f;
  return sig === 0 ? (status >> 8) & 0xff : 128 + sig;
}
