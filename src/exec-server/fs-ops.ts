/**
 * The exec-server's seven filesystem operations, run directly (in the server, for `sandbox: null`) or by the
 * `codex-fs` helper inside a sandbox — the same code both ways, as Codex does (exec-server spec §6).
 *
 * Params are decoded here (paths as absolute paths or `file://` URIs), so the helper receives exactly the RPC's
 * params. OS errors become Rust-style messages ("No such file or directory (os error 2)") with Codex's codes:
 * ENOENT → −32004, EACCES/EPERM/EINVAL and the fixed invalid-input texts → −32600, everything else → −32603.
 */
import * as fsp from "node:fs/promises";
import type { Stats } from "node:fs";
import { constants as osConstants } from "node:os";
import { basename, dirname, join } from "node:path";
import { decodeBase64, decodePath, encodeBase64, field, paramsObject, rpcError, RPC } from "./rpc.ts";

/** The fs method names (also the helper's `operation` values). */
export const FS_METHODS = [
  "fs/readFile",
  "fs/writeFile",
  "fs/createDirectory",
  "fs/getMetadata",
  "fs/readDirectory",
  "fs/remove",
  "fs/copy",
] as const;
/** One fs method name. */
export type FsMethod = (typeof FS_METHODS)[number];

/** Largest file `fs/readFile` returns, bytes (Codex's limit). */
export const MAX_READ_FILE_BYTES = 536_870_912;

const STRERROR: Record<number, string> = {
  1: "Operation not permitted",
  2: "No such file or directory",
  5: "Input/output error",
  9: "Bad file descriptor",
  12: "Cannot allocate memory",
  13: "Permission denied",
  16: "Device or resource busy",
  17: "File exists",
  18: "Invalid cross-device link",
  19: "No such device",
  20: "Not a directory",
  21: "Is a directory",
  22: "Invalid argument",
  24: "Too many open files",
  26: "Text file busy",
  27: "File too large",
  28: "No space left on device",
  30: "Read-only file system",
  31: "Too many links",
  36: "File name too long",
  39: "Directory not empty",
  40: "Too many levels of symbolic links",
  95: "Operation not supported",
};

/** errno number of a Node/Bun system error (`code` such as "ENOENT"), or undefined. */
export function errnoOf(e: unknown): number | undefined {
  const code = (e as NodeJS.ErrnoException | undefined)?.code;
  if (typeof code !== "string") return undefined;
  return (osConstants.errno as Record<string, number>)[code];
}

/** Rust's `io::Error` text of an errno: "<strerror> (os error N)". */
export function osErrorText(errno: number): string {
  return `${STRERROR[errno] ?? `Unknown error ${errno}`} (os error ${errno})`;
}

/** A thrown OS error as a JSON-RPC error with Codex's fs code mapping (spec §6.2). */
export function fsError(e: unknown): Error {
  const n = errnoOf(e);
  if (n === undefined) return e instanceof Error && "data" in e ? e : rpcError(RPC.INTERNAL, e instanceof Error ? e.message : String(e));
  const code =
    n === osConstants.errno.ENOENT
      ? RPC.NOT_FOUND
      : n === osConstants.errno.EACCES || n === osConstants.errno.EPERM || n === osConstants.errno.EINVAL
        ? RPC.INVALID_REQUEST
        : RPC.INTERNAL;
  return rpcError(code, osErrorText(n));
}

function invalidInput(message: string): Error {
  return rpcError(RPC.INVALID_REQUEST, message);
}

function ms(v: number): number {
  return Number.isFinite(v) && v > 0 ? Math.floor(v) : 0;
}

/** `p` resolved through symlinks as far as it exists, the rest appended (for the copy-into-itself check). */
async function canonicalPrefix(p: string): Promise<string> {
  const rest: string[] = [];
  let cur = p;
  for (;;) {
    try {
      return join(await fsp.realpath(cur), ...rest.reverse());
    } catch {
      const parent = dirname(cur);
      if (parent === cur) return p;
      rest.push(basename(cur));
      cur = parent;
    }
  }
}

async function copyDirectory(src: string, dst: string): Promise<void> {
  await fsp.mkdir(dst, { recursive: true });
  for (const name of await fsp.readdir(src)) {
    const s = join(src, name);
    const d = join(dst, name);
    const st = await fsp.lstat(s);
    if (st.isDirectory()) await copyDirectory(s, d);
    else if (st.isFile()) {
      await fsp.copyFile(s, d);
      await fsp.chmod(d, st.mode & 0o7777);
    } else if (st.isSymbolicLink()) await fsp.symlink(await fsp.readlink(s), d);
    // fifos, sockets, devices: skipped, as Codex does
  }
}

async function metadata(p: string): Promise<Record<string, unknown>> {
  const l = await fsp.lstat(p);
  const st: Stats = l.isSymbolicLink() ? await fsp.stat(p) : l;
  return {
    isDirectory: st.isDirectory(),
    isFile: st.isFile(),
    isSymlink: l.isSymbolicLink(),
    createdAtMs: ms(st.birthtimeMs),
    modifiedAtMs: ms(st.mtimeMs),
    size: st.size,
  };
}

/**
 * Decode `params` for `method` and run it directly (asynchronously: a big file or tree never blocks other sessions).
 * Resolves with the result object; throws JSON-RPC errors (−32602 for
 * bad params, the §6.2 mapping for OS errors). `params.sandbox` is ignored here (the caller decided where to run).
 */
export function runFsOperation(method: FsMethod, params: unknown): Promise<Record<string, unknown>> {
  return decodeFsOperation(method, params)();
}

/**
 * Decode `params` for `method` (throws −32602 now) and return the operation to run later (throws the §6.2 errors).
 * Codex decodes params before its initialize gate; this split lets the server do the same.
 */
export function decodeFsOperation(method: FsMethod, params: unknown): () => Promise<Record<string, unknown>> {
  const o = paramsObject(params, structName(method));
  const run = FS_DECODERS[method](o);
  return async () => {
    try {
      return await run();
    } catch (e) {
      throw fsError(e);
    }
  };
}

/** A decoded fs operation: run it later; OS errors it throws become §6.2 errors ({@link fsError}). */
type FsOperation = () => Promise<Record<string, unknown>>;

/** Each fs method's decoder: its params object → the operation (throws −32602 and the like while decoding). */
const FS_DECODERS: Record<FsMethod, (o: Record<string, unknown>) => FsOperation> = {
  "fs/readFile": decodeReadFile,
  "fs/writeFile": decodeWriteFile,
  "fs/createDirectory": decodeCreateDirectory,
  "fs/getMetadata": (o) => {
    const p = decodePath(o.path, "path");
    return () => metadata(p);
  },
  "fs/readDirectory": decodeReadDirectory,
  "fs/remove": decodeRemove,
  "fs/copy": decodeCopy,
};

function decodeReadFile(o: Record<string, unknown>): FsOperation {
  const p = decodePath(o.path, "path");
  return async () => {
    const st = await fsp.stat(p);
    if (!st.isFile() && st.isDirectory()) throw invalidInput(`path \`${p}\` is not a file`);
    if (st.size > MAX_READ_FILE_BYTES) throw invalidInput(`file is too large to read: limit is ${MAX_READ_FILE_BYTES} bytes`);
    return { dataBase64: encodeBase64(await fsp.readFile(p)) };
  };
}

function decodeWriteFile(o: Record<string, unknown>): FsOperation {
  const p = decodePath(o.path, "path");
  const b64 = field.string(o, "dataBase64");
  let data: Uint8Array;
  try {
    data = decodeBase64(b64);
  } catch (e) {
    throw rpcError(RPC.INVALID_REQUEST, `fs/writeFile requires valid base64 dataBase64: ${(e as Error).message}`);
  }
  return async () => {
    await fsp.writeFile(p, data);
    return {};
  };
}

function decodeCreateDirectory(o: Record<string, unknown>): FsOperation {
  const p = decodePath(o.path, "path");
  const recursive = field.optBool(o, "recursive") ?? true;
  return async () => {
    if (recursive) {
      await fsp.mkdir(p, { recursive: true });
      if (!(await fsp.stat(p)).isDirectory()) throw Object.assign(new Error("exists"), { code: "EEXIST" });
    } else await fsp.mkdir(p);
    return {};
  };
}

function decodeReadDirectory(o: Record<string, unknown>): FsOperation {
  const p = decodePath(o.path, "path");
  return async () => {
    const names = await fsp.readdir(p, { encoding: "buffer" });
    const dec = new TextDecoder("utf-8", { fatal: false });
    const entries: { fileName: string; isDirectory: boolean; isFile: boolean }[] = [];
    const dirBuf = Buffer.from(p.endsWith("/") ? p : `${p}/`);
    for (const name of names) {
      try {
        const st = await fsp.stat(Buffer.concat([dirBuf, name]));
        entries.push({ fileName: dec.decode(name), isDirectory: st.isDirectory(), isFile: st.isFile() });
      } catch {
        // broken symlink, loop, permission, race: skipped (Codex #17907)
      }
    }
    return { entries };
  };
}

function decodeRemove(o: Record<string, unknown>): FsOperation {
  const p = decodePath(o.path, "path");
  const recursive = field.optBool(o, "recursive") ?? true;
  const force = field.optBool(o, "force") ?? true;
  return async () => {
    let st: Stats;
    try {
      st = await fsp.lstat(p);
    } catch (e) {
      if (force && errnoOf(e) === osConstants.errno.ENOENT) return {};
      throw e;
    }
    if (st.isDirectory()) {
      if (recursive) await fsp.rm(p, { recursive: true, force: false });
      else await fsp.rmdir(p);
    } else await fsp.unlink(p);
    return {};
  };
}

function decodeCopy(o: Record<string, unknown>): FsOperation {
  const src = decodePath(o.sourcePath, "sourcePath");
  const dst = decodePath(o.destinationPath, "destinationPath");
  const recursive = field.bool(o, "recursive");
  return async () => {
    const st = await fsp.lstat(src);
    if (st.isDirectory()) {
      if (!recursive) throw invalidInput("fs/copy requires recursive: true when sourcePath is a directory");
      const s = await fsp.realpath(src);
      const d = await canonicalPrefix(dst);
      if (d === s || d.startsWith(s.endsWith("/") ? s : `${s}/`))
        throw invalidInput("fs/copy cannot copy a directory to itself or one of its descendants");
      await copyDirectory(src, dst);
    } else if (st.isSymbolicLink()) await fsp.symlink(await fsp.readlink(src), dst);
    else if (st.isFile()) {
      await fsp.copyFile(src, dst);
      await fsp.chmod(dst, st.mode & 0o7777);
    } else throw invalidInput("fs/copy only supports regular files, directories, and symlinks");
    return {};
  };
}

/** serde's struct name for a method's params (used in "invalid type: null, expected struct …"). */
function structName(method: FsMethod): string {
  const base = method.slice(3);
  return `Fs${base[0]!.toUpperCase()}${base.slice(1)}Params`;
}
