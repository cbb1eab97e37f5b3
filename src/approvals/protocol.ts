/**
 * The approver's wire (docs/approvals.md, "The protocol"): JSON lines over a Unix stream socket, one object per
 * line, at most {@link MAX_LINE_BYTES} bytes each. The server (`serve`) speaks first: a `refused` line and the end,
 * or `hello`, one `pending` per request waiting, then `listed`; afterwards `pending` for each new request and
 * `gone` for each that no longer waits. The client sends `answer` lines, each acknowledged by a `result`.
 */

/** Version of the protocol in `hello`. */
export const PROTOCOL_VERSION = 1;

/** Longest line either side accepts, bytes (a question is at most ~2.5 KB). */
export const MAX_LINE_BYTES = 64 * 1024;

/**
 * A person's answer: run it this once, run it and add an allow rule (where offered), or do not run it; for a
 * network question ({@link PendingRequest.network}) also `session`: that host and port until the server stops.
 */
export type Decision = "once" | "session" | "always" | "deny";

/** What a network question is about (the network proxy's question about a host its allow list does not name). */
export interface NetworkAbout {
  /** The host the command asked for, rendered by src/safe-text.ts and bounded (the command chose it). */
  host: string;
  port: number;
  /** How the request came to the proxy: `http`, `https_connect` or `socks5_tcp`. */
  protocol: string;
}

/** A request waiting for a person. */
export interface PendingRequest {
  /** `<server pid>-<n>`: unique among the servers sharing the folder. */
  id: string;
  /** The question, as the elicitation would show it (src/escalate/decision/decide.ts `elicitationMessage`). */
  message: string;
  /** Whether "always" is offered (not for a prompt that a `prompt` rule produced). */
  always: boolean;
  /**
   * Present for a network question: its host, port and protocol. Its answers are `once` (this command, this host
   * and port), `session` (this host and port until the server stops), `always` (every port of the host, from now
   * on: a `network_rule`) and `deny`.
   */
  network?: NetworkAbout;
  /** Milliseconds left before the request is denied as unanswered. */
  expires_in_ms: number;
}

/** Lines from the server. */
export type ServerLine =
  | { type: "hello"; version: number; pid: number; cwd: string; timeout_ms: number }
  | { type: "refused"; reason: string }
  | ({ type: "pending" } & PendingRequest)
  | { type: "listed" }
  | { type: "gone"; id: string; why: "approved" | "denied" | "timed out" }
  | { type: "result"; id: string; ok: boolean; error?: string };

/** Lines from a client. */
export type ClientLine = { type: "answer"; id: string; decision: Decision };

/** Split complete lines off `buf` (what is left stays in the returned rest). Throws when a line is too long. */
export function takeLines(buf: string): { lines: string[]; rest: string } {
  const parts = buf.split("\n");
  const rest = parts.pop()!;
  if (Buffer.byteLength(rest) > MAX_LINE_BYTES) throw new Error(`a line longer than ${MAX_LINE_BYTES} bytes`);
  return { lines: parts.filter((l) => l.trim() !== ""), rest };
}

/** Parse a client line; undefined when it is not one. */
export function parseClientLine(line: string): ClientLine | undefined {
  let v: unknown;
  try {
    v = JSON.parse(line);
  } catch {
    return undefined;
  }
  const o = v as Record<string, unknown>;
  if (typeof o !== "object" || o === null || o.type !== "answer" || typeof o.id !== "string") return undefined;
  if (o.decision !== "once" && o.decision !== "session" && o.decision !== "always" && o.decision !== "deny") return undefined;
  return { type: "answer", id: o.id, decision: o.decision };
}
