/**
 * stderr logger (stdout is the MCP channel), plus an optional log file that keeps everything `serve` wrote.
 *
 * Levels: `debug` < `info` < `notice` < `warn` < `error`. The default threshold is `notice`: warnings, errors and
 * the server's decisions other than a plain run (escalated, denied, prompted, escalation refused and why) print;
 * `SHELLMCP_LOG=debug|info|notice|warn|error` sets it. Only the server logs at `notice`: the exec wrapper, whose
 * stderr is the user's terminal, stays silent by default.
 */
import { closeSync, constants, fstatSync, mkdirSync, openSync, writeSync } from "node:fs";
import { dirname } from "node:path";
import { visible } from "./safe-text.ts";
import { writeStderr } from "./stderr.ts";

type Level = "debug" | "info" | "notice" | "warn" | "error";
const RANK: Record<Level, number> = { debug: 0, info: 1, notice: 2, warn: 3, error: 4 };

function threshold(): number {
  const v = process.env.SHELLMCP_LOG as Level | undefined;
  return v !== undefined && v in RANK ? RANK[v] : RANK.notice;
}

let fileFd: number | undefined;

/**
 * Also append every line written from now on to `path` (created with mode 0600, its folder with 0700). The file
 * may lie where a sandboxed command can write (`$CODEX_HOME` under a writable HOME), and log lines carry argv the
 * model chose: so the last component is never followed (`O_NOFOLLOW`), and the opened file must be a regular file
 * of this user with one link (a hard link to `~/.bashrc` would otherwise get those lines). Returns the reason when
 * it cannot be used (logging then stays on stderr only).
 */
export function setLogFile(path: string): string | undefined {
  let fd: number | undefined;
  try {
    mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
    fd = openSync(path, constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NOFOLLOW | constants.O_NONBLOCK, 0o600);
    const st = fstatSync(fd);
    if (!st.isFile() || st.nlink !== 1 || st.uid !== process.getuid?.())
      throw new Error(`${path} is not a regular file of this user with a single link`);
    if (fileFd !== undefined) closeSync(fileFd);
    fileFd = fd;
    return undefined;
  } catch (e) {
    if (fd !== undefined) closeSync(fd);
    return (e as Error).message;
  }
}

function emit(level: Level, msg: string, data?: Record<string, unknown>): void {
  if (RANK[level] < threshold()) return;
  // Log lines carry argv, paths and hosts the model chose: JSON escapes C0 controls, and visible() the rest (C1,
  // bidi and format characters as \uXXXX escapes, still valid JSON), so a line cannot rewrite the terminal.
  const tail = data === undefined ? "" : ` ${JSON.stringify(data)}`;
  const line = `shellmcp ${level}: ${visible(`${msg}${tail}`)}\n`;
  writeStderr(line);
  if (fileFd !== undefined) {
    try {
      writeSync(fileFd, `${new Date().toISOString()} ${line}`);
    } catch {
      // a full disk must not stop the server
    }
  }
}

/** Log functions; `data` is appended as compact JSON. `notice`: the server's decisions (shown by default). */
export const log = {
  debug: (msg: string, data?: Record<string, unknown>) => emit("debug", msg, data),
  info: (msg: string, data?: Record<string, unknown>) => emit("info", msg, data),
  notice: (msg: string, data?: Record<string, unknown>) => emit("notice", msg, data),
  warn: (msg: string, data?: Record<string, unknown>) => emit("warn", msg, data),
  error: (msg: string, data?: Record<string, unknown>) => emit("error", msg, data),
};
