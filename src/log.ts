/**
 * stderr-only logger. Off unless `SHELLMCP_LOG` is `debug` or `info` (stdout is the MCP channel, and
 * the exec wrapper's stderr is the user's terminal, so silence is the default). `warn`/`error` always print.
 */
import { writeStderr } from "./stderr.ts";

type Level = "debug" | "info" | "warn" | "error";
const RANK: Record<Level, number> = { debug: 0, info: 1, warn: 2, error: 3 };

function threshold(): number {
  const v = process.env.SHELLMCP_LOG;
  return v === "debug" || v === "info" ? RANK[v] : RANK.warn;
}

function emit(level: Level, msg: string, data?: Record<string, unknown>): void {
  if (RANK[level] < threshold()) return;
  const tail = data === undefined ? "" : ` ${JSON.stringify(data)}`;
  writeStderr(`shellmcp ${level}: ${msg}${tail}\n`);
}

/** Log functions; `data` is appended as compact JSON. */
export const log = {
  debug: (msg: string, data?: Record<string, unknown>) => emit("debug", msg, data),
  info: (msg: string, data?: Record<string, unknown>) => emit("info", msg, data),
  warn: (msg: string, data?: Record<string, unknown>) => emit("warn", msg, data),
  error: (msg: string, data?: Record<string, unknown>) => emit("error", msg, data),
};
