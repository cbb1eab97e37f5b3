/**
 * `shellmcp approvals`: the local approver a person runs beside an MCP client that cannot ask them (no
 * elicitation), for `serve --approver` (docs/approvals.md, "Running the approver"):
 *
 * - no flag, in a terminal: stays connected to every `serve` of this user with an approver and shows their waiting
 *   requests live (one answered elsewhere disappears, a new one appears), the oldest with its answers — o(nce),
 *   a(lways), d(eny), s(kip), and s(e)ssion for a network question, with its host, port and protocol — taken on one
 *   key press (raw mode), until q or Ctrl-C;
 * - `--list` (`--json`: one JSON object per line): the requests waiting now;
 * - `--approve ID`, `--always ID`, `--deny ID`: answer one request; status 0 when the server took the answer.
 *
 * Questions are the elicitation's own text, rendered again by src/safe-text.ts before they reach the terminal.
 */
import { watch as watchFs, type FSWatcher } from "node:fs";
import { bounded, visibleLines } from "../safe-text.ts";
import { writeStderr } from "../stderr.ts";
import { listSockets, ServerConnection, STALE } from "./client.ts";
import { approvalsDirs, ensureApprovalsDir } from "./place.ts";
import type { Decision, PendingRequest } from "./protocol.ts";

/** Options of `shellmcp approvals`. */
export interface ApprovalsOptions {
  list?: boolean;
  json?: boolean;
  approve?: string;
  always?: string;
  deny?: string;
}

/** A waiting request with the server it belongs to. */
export interface ListedRequest extends PendingRequest {
  server: { pid: number; cwd: string; socket: string };
}

/** How long one server may take to say hello and list its requests, ms. */
const SERVER_DEADLINE_MS = 5000;

function withDeadline<T>(p: Promise<T>, ms: number, fallback: T): Promise<T> {
  let t: ReturnType<typeof setTimeout>;
  return Promise.race([p, new Promise<T>((r) => (t = setTimeout(() => r(fallback), ms)))]).finally(() => clearTimeout(t));
}

/** Connect to `socket`, read the hello and the waiting requests; the connection stays open for an answer. */
async function openServer(
  socket: string,
): Promise<{ conn: ServerConnection; pid: number; cwd: string; pending: PendingRequest[] } | { error: string }> {
  const conn = new ServerConnection(socket);
  const why = await withDeadline(conn.open(), SERVER_DEADLINE_MS, "no connection in time");
  if (why !== undefined) {
    conn.close();
    return { error: why };
  }
  const read = async (): Promise<{ pid: number; cwd: string; pending: PendingRequest[] } | { error: string }> => {
    let hello: { pid: number; cwd: string } | undefined;
    const pending: PendingRequest[] = [];
    for (;;) {
      const l = await conn.next();
      if (l === undefined) return { error: "the server closed the connection" };
      if (l.type === "refused") return { error: l.reason };
      if (l.type === "hello") hello = { pid: l.pid, cwd: l.cwd };
      else if (l.type === "pending")
        pending.push({
          id: l.id,
          message: l.message,
          always: l.always,
          expires_in_ms: l.expires_in_ms,
          ...(l.network === undefined ? {} : { network: l.network }),
        });
      else if (l.type === "listed") return hello === undefined ? { error: "no hello from the server" } : { ...hello, pending };
    }
  };
  const r = await withDeadline(read(), SERVER_DEADLINE_MS, { error: "the server did not answer in time" } as const);
  if ("error" in r) {
    conn.close();
    return r;
  }
  return { conn, ...r };
}

/** The sockets in every folder of `dirs`; unsafe folders and skipped files go to `problems`. */
function socketsIn(dirs: readonly string[], problems: string[]): string[] {
  const sockets: string[] = [];
  for (const dir of dirs) {
    const found = listSockets(dir);
    if ("error" in found) problems.push(found.error);
    else (sockets.push(...found.sockets), problems.push(...found.skipped));
  }
  return sockets;
}

/** Every waiting request of every server in the approver's folders `dirs`; problems go to `problems`. */
export async function listRequests(dirs: readonly string[], problems: string[]): Promise<ListedRequest[]> {
  const out: ListedRequest[] = [];
  for (const socket of socketsIn(dirs, problems)) {
    const s = await openServer(socket);
    if ("error" in s) {
      // A socket whose server ended (killed before it could remove it) refuses connections: not worth a word.
      if (s.error !== STALE) problems.push(`${socket}: ${s.error}`);
      continue;
    }
    s.conn.close();
    for (const p of s.pending) out.push({ ...p, server: { pid: s.pid, cwd: s.cwd, socket } });
  }
  return out;
}

/** Send `decision` for request `id` to its server; resolves with an error sentence, or undefined when it was taken. */
export async function answerRequest(dirs: readonly string[], id: string, decision: Decision): Promise<string | undefined> {
  const m = /^(\d+)-\d+$/.exec(id);
  if (m === null) return `${JSON.stringify(id)} is not a request id (they look like 12345-1)`;
  const problems: string[] = [];
  const socket = socketsIn(dirs, problems).find((s) => s.endsWith(`/${m[1]}.sock`));
  if (socket === undefined)
    return `no shellmcp server with pid ${m[1]} listens in ${dirs.join(" or ")}${problems.length > 0 ? ` (${problems.join("; ")})` : ""}`;
  const s = await openServer(socket);
  if ("error" in s) return `${socket}: ${s.error}`;
  try {
    s.conn.send({ type: "answer", id, decision });
    const result = await withDeadline(
      (async () => {
        for (;;) {
          const l = await s.conn.next();
          if (l === undefined) return "the server closed the connection";
          if (l.type === "result" && l.id === id) return l.ok ? undefined : (l.error ?? "refused");
        }
      })(),
      SERVER_DEADLINE_MS,
      "the server did not answer in time",
    );
    return result;
  } finally {
    s.conn.close();
  }
}

/** The answers offered for `r`, in order. */
export function answersFor(r: Pick<PendingRequest, "always" | "network">): Decision[] {
  return r.network !== undefined ? ["once", "session", "always", "deny"] : r.always ? ["once", "always", "deny"] : ["once", "deny"];
}

/** How a request is shown to a person (a network question's host, port and protocol on a line of their own). */
export function describe(r: ListedRequest): string {
  const secs = Math.ceil(r.expires_in_ms / 1000);
  const n = r.network;
  return (
    `[${r.id}] server ${r.server.pid} in ${bounded(r.server.cwd, 512)} (denied in ${secs} s if nobody answers)\n` +
    visibleLines(r.message)
      .split("\n")
      .map((l) => `  ${l}`)
      .join("\n") +
    (n === undefined
      ? ""
      : `\n  host: ${bounded(String(n.host), 256)}  port: ${Number(n.port)}  protocol: ${bounded(String(n.protocol), 32)}`) +
    `\n  answers: ${answersFor(r).join(", ")}` +
    (n === undefined
      ? ""
      : " (once: this command, this port; session: this host and port until the server stops; always: every port of this host, a network_rule)")
  );
}

/** Run `shellmcp approvals` with `o`; returns the exit status. */
export async function approvalsMain(o: ApprovalsOptions): Promise<number> {
  if (process.platform !== "linux") {
    writeStderr("shellmcp approvals: the local approver runs on Linux only\n");
    return 2;
  }
  let dirs: string[];
  try {
    dirs = approvalsDirs();
  } catch (e) {
    writeStderr(`shellmcp approvals: ${(e as Error).message}\n`);
    return 2;
  }
  const answers = [
    ["once", o.approve],
    ["always", o.always],
    ["deny", o.deny],
  ].filter((a): a is [Decision, string] => a[1] !== undefined);
  if (answers.length > 1) {
    writeStderr("shellmcp approvals: give one of --approve, --always, --deny\n");
    return 2;
  }
  if (answers.length === 1) {
    const [decision, id] = answers[0]!;
    const why = await answerRequest(dirs, id, decision);
    if (why !== undefined) {
      writeStderr(`shellmcp approvals: ${visibleLines(why)}\n`);
      return 1;
    }
    process.stdout.write(`${decision === "deny" ? "denied" : decision === "always" ? "approved always" : "approved once"}: ${id}\n`);
    return 0;
  }
  if (o.list === true || o.json === true || !process.stdin.isTTY) {
    const problems: string[] = [];
    const reqs = await listRequests(dirs, problems);
    for (const p of problems) writeStderr(`shellmcp approvals: ${visibleLines(p)}\n`);
    if (o.json === true) for (const r of reqs) process.stdout.write(JSON.stringify(r) + "\n");
    else if (reqs.length === 0) process.stdout.write(`no request is waiting (looked in ${dirs.join(" and ")})\n`);
    else process.stdout.write(reqs.map(describe).join("\n\n") + "\n");
    return dirs.every((d) => "error" in listSockets(d)) ? 1 : 0;
  }
  return interactive(dirs);
}

/** One server the interactive approver stays connected to. */
interface Watched {
  conn: ServerConnection;
  pid: number;
  cwd: string;
  socket: string;
  /** Answers sent and not yet confirmed: id → resolve(error sentence or undefined). */
  results: Map<string, (why: string | undefined) => void>;
}

/** The key of each answer on the terminal. */
const KEYS: Record<Decision, string> = { once: "o", session: "e", always: "a", deny: "d" };

/**
 * The terminal loop (issue 41): stays connected to every `serve` with an approver (new ones are found every
 * second), so what it shows is live — a request answered elsewhere or timed out disappears with a line saying so,
 * a new one appears when it is asked. It shows the oldest waiting request and answers it on one key press (the
 * terminal in raw mode: no Enter), `s` skips it (it stays waiting, shown again when it is the only one left),
 * `q` or Ctrl-C ends. Each connection also tells its server that someone is watching (src/approvals/server.ts
 * `watched`: where a client answers questions without a person, they come here). Resolves with the exit status (0)
 * when stdin ends or the person quits.
 */
async function interactive(dirs: readonly string[]): Promise<number> {
  const screen = new ApproverScreen(dirs);
  process.stdout.write(`shellmcp approvals: watching ${dirs.join(" and ")} (q or Ctrl-C to stop)\n`);
  let done = false;
  const stdin = process.stdin;
  const raw = stdin.isTTY === true;
  if (raw) stdin.setRawMode(true);
  stdin.setEncoding("utf8");
  const ended = new Promise<void>((resolve) => {
    const finish = () => {
      done = true;
      resolve();
    };
    stdin.on("end", finish);
    stdin.on("data", (chunk: string) => screen.keys(chunk, finish));
  });
  // A new server's socket is seen at once (inotify), so the server knows someone watches before its first
  // question; and every second anyway.
  let wake: (() => void) | undefined;
  const watchers = watchDirs(dirs, () => wake?.());
  await screen.scan();
  screen.show();
  while (!done) {
    await Promise.race([ended, Bun.sleep(1000), new Promise<void>((r) => (wake = r))]);
    if (!done) await screen.scan();
  }
  for (const w of watchers) w.close();
  if (raw) stdin.setRawMode(false);
  stdin.pause();
  screen.close();
  process.stdout.write("\n");
  return 0;
}

/**
 * Watch each folder of `dirs` for new sockets, calling `wake` on any change: each is first made as the servers make
 * it (0700, ./place.ts `ensureApprovalsDir`), so that it can be watched before its first server starts. A folder
 * that cannot be made or watched is left out (the one-second look finds its servers). Returns the watchers, to close.
 */
function watchDirs(dirs: readonly string[], wake: () => void): FSWatcher[] {
  return dirs.flatMap((d) => {
    try {
      ensureApprovalsDir(d);
      return [watchFs(d, () => wake())];
    } catch {
      return [];
    }
  });
}

/**
 * What the interactive approver ({@link interactive}) knows and shows: the servers it is connected to, their waiting
 * requests, the one on the screen; it writes to stdout (problems to stderr, each once).
 */
class ApproverScreen {
  /** The servers connected to, by socket path. */
  private readonly servers = new Map<string, Watched>();
  /** Every server's waiting requests, by id, in the order they came (the oldest first). */
  private readonly waiting = new Map<string, ListedRequest>();
  /** Ids of the requests skipped (`s`): shown again only when no other is waiting. */
  private readonly skipped = new Set<string>();
  /** Problems already written to stderr (a folder or server that fails every second is said once). */
  private readonly said = new Set<string>();
  /** The request on the screen; null: "no request is waiting" is; undefined: the screen must be redrawn. */
  private shown: string | null | undefined;
  /** An answer is on its way to its server: the screen and the keys wait for its result. */
  private answering = false;

  /** `dirs`: the approver's folders, where the servers' sockets are. */
  constructor(private readonly dirs: readonly string[]) {}

  /** The request to show: the oldest not skipped, else the oldest; undefined when none is waiting. */
  private current(): ListedRequest | undefined {
    const all = [...this.waiting.values()];
    return all.find((r) => !this.skipped.has(r.id)) ?? all[0];
  }

  /** Show the current request with its keys (or that none is waiting), unless it is on the screen already or an answer is on its way. */
  show(): void {
    if (this.answering) return;
    const r = this.current();
    if ((r?.id ?? null) === this.shown) return;
    this.shown = r?.id ?? null;
    if (r === undefined) {
      out(`no request is waiting\n`);
      return;
    }
    const keys = answersFor(r).map((d) => ({ once: "[o]nce", session: "s[e]ssion", always: "[a]lways", deny: "[d]eny" })[d]);
    const more = this.waiting.size > 1 ? ` (${this.waiting.size - 1} more waiting)` : "";
    out(`\n${describe(r)}\n${[...keys, "[s]kip", "[q]uit"].join(", ")}${more}? `);
  }

  /** Connect to every server in the folders not connected yet ({@link watch}); problems go to stderr, each once. */
  async scan(): Promise<void> {
    const problems: string[] = [];
    for (const socket of socketsIn(this.dirs, problems)) {
      if (this.servers.has(socket)) continue;
      const s = await openServer(socket);
      if ("error" in s) {
        if (s.error !== STALE) problems.push(`${socket}: ${s.error}`);
        continue;
      }
      void this.watch(socket, s);
    }
    for (const p of problems) if (!this.said.has(p)) (this.said.add(p), writeStderr(`shellmcp approvals: ${visibleLines(p)}\n`));
  }

  /**
   * Follow the server at `socket` (just opened, `s`: its hello and waiting requests) until its connection ends: add its
   * requests as they come, drop those answered elsewhere or timed out (with a line saying so), hand each answer's
   * result to whoever sent it. When it ends, its requests go and its unconfirmed answers get "the server closed the
   * connection".
   */
  private async watch(socket: string, s: { conn: ServerConnection; pid: number; cwd: string; pending: PendingRequest[] }): Promise<void> {
    const w: Watched = { conn: s.conn, pid: s.pid, cwd: s.cwd, socket, results: new Map() };
    this.servers.set(socket, w);
    const add = (p: PendingRequest) => this.waiting.set(p.id, { ...p, server: { pid: w.pid, cwd: w.cwd, socket } });
    for (const p of s.pending) add(p);
    this.show();
    for (;;) {
      const l = await w.conn.next();
      if (l === undefined) break;
      if (l.type === "pending") {
        const { type: _t, ...p } = l;
        add(p);
        this.show();
      } else if (l.type === "gone") {
        const had = this.waiting.delete(l.id);
        this.skipped.delete(l.id);
        if (had && !w.results.has(l.id)) {
          out(`\n[${l.id}] ${l.why === "timed out" ? "timed out: denied" : `${l.why} elsewhere`}\n`);
          if (this.shown === l.id) this.shown = undefined;
          this.show();
        }
      } else if (l.type === "result") {
        w.results.get(l.id)?.(l.ok ? undefined : (l.error ?? "refused"));
        w.results.delete(l.id);
      }
    }
    this.servers.delete(socket);
    for (const [id, r] of this.waiting) if (r.server.socket === socket) this.waiting.delete(id);
    for (const f of w.results.values()) f("the server closed the connection");
    if (typeof this.shown === "string" && !this.waiting.has(this.shown)) ((this.shown = undefined), this.show());
  }

  /** Send `decision` for `r` to its server, wait for its result, and say it (taken, or why not). */
  private async answer(r: ListedRequest, decision: Decision): Promise<void> {
    const w = this.servers.get(r.server.socket);
    if (w === undefined) return;
    this.answering = true;
    const why = await new Promise<string | undefined>((resolve) => {
      w.results.set(r.id, resolve);
      w.conn.send({ type: "answer", id: r.id, decision });
    });
    this.waiting.delete(r.id);
    this.answering = false;
    out(
      `${decision}\n` +
        (why === undefined
          ? `${decision === "deny" ? "denied" : decision === "session" ? "approved for the session" : "approved"}: ${r.id}\n`
          : `not taken: ${visibleLines(why)}\n`),
    );
    this.shown = undefined;
    this.show();
  }

  /**
   * Take the key presses of `chunk` (terminal input): `q`, Ctrl-C or Ctrl-D call `quit` (the rest is ignored); `s`
   * skips the request on the screen; an answer's key ({@link KEYS}) answers it. Keys pressed while no request is on
   * the screen or an answer is on its way are ignored.
   */
  keys(chunk: string, quit: () => void): void {
    for (const key of chunk.toLowerCase()) {
      if (key === "\u0003" || key === "\u0004" || key === "q") return quit();
      const r = this.current();
      if (r === undefined || this.answering || r.id !== this.shown) continue;
      if (key === "s") {
        this.skipped.add(r.id);
        out("skip\n");
        this.shown = undefined;
        this.show();
        continue;
      }
      const decision = answersFor(r).find((d) => KEYS[d] === key);
      if (decision !== undefined) void this.answer(r, decision);
    }
  }

  /** Close every server connection. */
  close(): void {
    for (const w of this.servers.values()) w.conn.close();
  }
}

/** Write `t` to stdout (the approver's screen). */
function out(t: string): void {
  process.stdout.write(t);
}
