/**
 * The server half of the local approver (docs/approvals.md): with `serve --approver` (or `[shellmcp] approver =
 * true`), a `prompt` for a client that cannot ask a person (no elicitation) waits here, on `<folder>/<pid>.sock`
 * (./place.ts), for `shellmcp approvals` to answer it, at most `timeoutMs`; then it is denied with a message that
 * says nobody answered and how to run the approver.
 *
 * Every connection is judged before a byte of it is read (./peer.ts): a process inside any sandbox — a command of
 * this server's calls included — is refused and never sees a request. What a person is shown is the elicitation's
 * own question (already rendered by src/safe-text.ts); the answers map to the elicitation's: once = accept,
 * always = accept with `always_allow` (only where the form offers it), deny = decline. A network question (the
 * proxy's, about a host: src/mcp/network-approval.ts) also names its host, port and protocol, and its answers are
 * the network form's scopes: once, session, always = accept with `scope`, deny = decline.
 */
import { chmodSync, existsSync, lstatSync, readdirSync, unlinkSync } from "node:fs";
import { join } from "node:path";
import type { Socket } from "bun";
import { ShellmcpError } from "../errors.ts";
import { log } from "../log.ts";
import { checkPeer } from "./peer.ts";
import { approvalsDirs, dirProblem, ensureApprovalsDir, socketPath } from "./place.ts";
import { bounded } from "../safe-text.ts";
import { parseClientLine, PROTOCOL_VERSION, takeLines, type NetworkAbout, type PendingRequest, type ServerLine } from "./protocol.ts";

/**
 * Remove the sockets (`<pid>.sock`) that servers which no longer run left in the approver's folders (./place.ts
 * `approvalsDirs`; a server killed with SIGKILL cannot remove its own): at `serve` and `exec-server` start. A socket
 * goes when its pid runs no more, or when nothing listens on it any more (a connection is refused: the pid was reused
 * by another process). Only sockets in a folder that passes `dirProblem` (this user's, 0700, no link) are looked at;
 * the folders are not made. Resolves to the paths removed; never rejects.
 */
export async function sweepDeadApproverSockets(env: Record<string, string | undefined> = process.env): Promise<string[]> {
  const removed: string[] = [];
  let dirs: string[];
  try {
    dirs = approvalsDirs(env);
  } catch {
    return removed;
  }
  const gone = (path: string) => {
    try {
      if (lstatSync(path).isSocket()) {
        unlinkSync(path);
        removed.push(path);
      }
    } catch {
      // already gone
    }
  };
  for (const dir of dirs) {
    if (!existsSync(dir) || dirProblem(dir) !== undefined) continue;
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch {
      continue;
    }
    for (const name of names) {
      const m = /^(\d+)\.sock$/.exec(name);
      if (m === null || Number(m[1]) === process.pid) continue;
      const path = join(dir, name);
      if (!existsSync(`/proc/${m[1]}`)) {
        gone(path);
        continue;
      }
      const refused = await new Promise<boolean>((done) => {
        Bun.connect({
          unix: path,
          socket: {
            open: (s) => (s.end(), done(false)),
            data: () => {},
            error: () => done(false),
            connectError: (_s, e) => done((e as NodeJS.ErrnoException).code === "ECONNREFUSED"),
          },
        }).catch((e: unknown) => done((e as NodeJS.ErrnoException).code === "ECONNREFUSED"));
      });
      if (refused) gone(path);
    }
  }
  return removed;
}

/**
 * When the approver is asked: `fallback` (`--approver`, `approver = true`) only for a client without elicitation;
 * `always` (`--approver always`, `approver = "always"`) instead of the client's elicitation too, for clients that
 * declare it but have nobody to show it to (Claude Code's print mode and `codex exec` answer at once, unasked).
 */
export type ApproverMode = "fallback" | "always";

/** Default wait for a person's answer, ms (`[shellmcp] approver_timeout_ms`, `--approver-timeout-ms`). */
export const DEFAULT_APPROVER_TIMEOUT_MS = 120_000;

/**
 * An answer other than accept this fast (ms) came from no person (issue 41): Claude Code's print mode cancels in
 * about a millisecond, and nobody reads a question and presses a key in 50 ms.
 */
export const HUMANLESS_MS = 50;

/** How long after its last connection a `shellmcp approvals` still counts as running, ms (it looks every second). */
export const WATCH_GRACE_MS = 3000;

/** A client's elicitation as the calls pass it (a network question adds what it is about, which it ignores). */
export type ClientElicit = (message: string, form: never, about?: never) => Promise<ApproverAnswer>;

/** Most clients connected at once. */
const MAX_CLIENTS = 32;

/** The answer the asking code gets: the shape of an MCP elicitation result. */
export interface ApproverAnswer {
  action: "accept" | "decline" | "cancel";
  content?: Record<string, unknown>;
}

/** The form the asking code passes: only whether it has an `always_allow` field matters here. */
export interface ApproverForm {
  properties: Record<string, unknown>;
}

interface Waiting {
  request: Omit<PendingRequest, "expires_in_ms">;
  deadline: number;
  answer: (a: ApproverAnswer) => void;
}

interface Conn {
  /** The peer passed the checks. */
  trusted: boolean;
  buf: string;
}

/** The text of a request nobody answered in time (the Deny reason the model reads). */
export function unansweredText(timeoutMs: number, dir: string): string {
  return (
    `nobody answered within ${Math.round(timeoutMs / 1000)} s: this MCP client cannot ask a person (no elicitation), so shellmcp ` +
    `waited for its local approver and no one answered; the program was not run. Tell the user: to approve or deny ` +
    `such commands, run \`shellmcp approvals\` in a terminal beside the client (as the same user, with the same ` +
    `XDG_RUNTIME_DIR or CODEX_HOME; its sockets are in ${dir})`
  );
}

/** A listening approver of one `serve` (see the module comment). */
export class Approver {
  private readonly waiting = new Map<string, Waiting>();
  private readonly clients = new Set<Socket<Conn>>();
  private next = 0;
  private closed = false;
  private refusals = 0;
  /** The client answered a question without a person (see {@link askerFor}). */
  private humanless = false;
  /** When the last trusted connection ended (ms since the epoch). */
  private lastWatcher = 0;

  private constructor(
    readonly dir: string,
    readonly path: string,
    readonly timeoutMs: number,
    readonly mode: ApproverMode,
    private readonly listener: { stop(closeActive?: boolean): void },
  ) {}

  /**
   * Listen on `<dir>/<pid>.sock` (`dir` made and checked by ./place.ts; the socket `0600`), removed when the
   * process exits. Throws `CONFIG` when the folder is unsafe or the path too long, or the listen error.
   */
  static start(dir: string, timeoutMs: number = DEFAULT_APPROVER_TIMEOUT_MS, mode: ApproverMode = "fallback"): Approver {
    ensureApprovalsDir(dir);
    const path = socketPath(dir, process.pid);
    try {
      if (lstatSync(path).isSocket()) unlinkSync(path); // left by an earlier process with this pid
    } catch {
      // none
    }
    let self: Approver | undefined;
    const old = process.umask(0o177);
    let listener;
    try {
      listener = Bun.listen<Conn>({
        unix: path,
        socket: {
          open: (s) => self!.opened(s),
          data: (s, d) => self!.received(s, d),
          close: (s) => self!.left(s),
          error: (s) => self!.left(s),
        },
      });
    } finally {
      process.umask(old);
    }
    chmodSync(path, 0o600);
    self = new Approver(dir, path, timeoutMs, mode, listener);
    process.on("exit", () => self!.removeSocket());
    log.info("local approver listening", { socket: path, timeoutMs, mode });
    return self;
  }

  /**
   * Ask a person through the approver, as an MCP elicitation would: resolves with their answer, or rejects after
   * the timeout with a `ShellmcpError` `UNANSWERED` whose message is {@link unansweredText} (the decision,
   * src/escalate/decision/decide.ts, turns it into a Deny with that reason). `network`: the question is the network
   * proxy's about that host (its form's `scope` choices are offered; the host is rendered here).
   */
  readonly elicit = (message: string, form: ApproverForm, network?: NetworkAbout): Promise<ApproverAnswer> => {
    if (this.closed) return Promise.reject(new Error("the local approver is closed"));
    const id = `${process.pid}-${++this.next}`;
    const always = network !== undefined || "always_allow" in form.properties;
    const about =
      network === undefined ? undefined : { host: bounded(network.host, 256), port: network.port, protocol: bounded(network.protocol, 32) };
    return new Promise<ApproverAnswer>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.drop(id, "timed out");
        log.notice("approval request unanswered", { id, timeoutMs: this.timeoutMs });
        reject(new ShellmcpError("UNANSWERED", unansweredText(this.timeoutMs, this.dir)));
      }, this.timeoutMs);
      this.waiting.set(id, {
        request: { id, message, always, ...(about === undefined ? {} : { network: about }) },
        deadline: Date.now() + this.timeoutMs,
        answer: (a) => {
          clearTimeout(timer);
          resolve(a);
        },
      });
      log.notice("a command waits for a person's approval: run `shellmcp approvals` beside the client", { id, socket: this.path });
      for (const c of this.clients) if (c.data.trusted) this.send(c, this.pendingLine(id));
    });
  };

  /**
   * How a call asks a person, given the client's elicitation (`clientElicit`, undefined when it has none): this
   * approver in `always` mode or when the client has none; else the client's, watched (issue 41): a client that
   * declares elicitation but answers without a person — Claude Code's print mode (`claude -p`) cancels at once,
   * `codex exec` declines at once — is recognised by its behaviour: an answer other than accept within
   * {@link HUMANLESS_MS} of the question, faster than anyone can read it. From then on (for this server, i.e. this
   * client session) its questions go to this approver whenever someone runs `shellmcp approvals` ({@link watched}),
   * the first one included; with nobody there, the client's own answer stands (as before: denied at once, not a
   * wait of the approver's timeout for nobody). `clientInfo` is not used: interactive and print mode give the same.
   */
  askerFor<F extends ClientElicit>(clientElicit: F | undefined): F | Approver["elicit"] {
    if (this.mode === "always" || clientElicit === undefined) return this.elicit;
    const watchedElicit = async (message: string, form: ApproverForm, network?: NetworkAbout): Promise<ApproverAnswer> => {
      if (this.humanless && this.watched()) return this.elicit(message, form, network);
      const t0 = performance.now();
      const a = await clientElicit(message, form as never, network as never);
      const ms = performance.now() - t0;
      if (a.action === "accept" || ms >= HUMANLESS_MS) return a;
      if (!this.humanless) {
        this.humanless = true;
        log.notice(
          "the client answered an approval question without a person (in print mode?): its questions go to `shellmcp approvals` when it runs",
          {
            action: a.action,
            ms: Math.round(ms),
          },
        );
      }
      // A person who just started `shellmcp approvals` may be connecting still: a moment's grace.
      for (let i = 0; i < 5 && !this.watched(); i++) await Bun.sleep(50);
      return this.watched() ? this.elicit(message, form, network) : a;
    };
    return watchedElicit as unknown as F;
  }

  /**
   * Whether someone runs `shellmcp approvals` for this server: a trusted connection is open, or one ended less than
   * {@link WATCH_GRACE_MS} ago (a watcher that reconnects between looks).
   */
  watched(): boolean {
    for (const c of this.clients) if (c.data.trusted) return true;
    return Date.now() - this.lastWatcher < WATCH_GRACE_MS;
  }

  /** The requests waiting now (ids and questions). */
  pending(): PendingRequest[] {
    return [...this.waiting.keys()].map((id) => this.pendingLine(id)).map(({ type: _t, ...r }) => r);
  }

  /** Stop listening, remove the socket, end every connection; waiting requests stay until answered elsewhere or timed out. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.listener.stop(true);
    for (const c of this.clients) c.end();
    this.removeSocket();
  }

  private removeSocket(): void {
    try {
      if (lstatSync(this.path).isSocket()) unlinkSync(this.path);
    } catch {
      // gone
    }
  }

  private pendingLine(id: string): Extract<ServerLine, { type: "pending" }> {
    const w = this.waiting.get(id)!;
    return { type: "pending", ...w.request, expires_in_ms: Math.max(0, w.deadline - Date.now()) };
  }

  private drop(id: string, why: Extract<ServerLine, { type: "gone" }>["why"]): void {
    if (!this.waiting.delete(id)) return;
    for (const c of this.clients) if (c.data.trusted) this.send(c, { type: "gone", id, why });
  }

  private send(s: Socket<Conn>, line: ServerLine): void {
    s.write(JSON.stringify(line) + "\n");
  }

  private opened(s: Socket<Conn>): void {
    s.data = { trusted: false, buf: "" };
    if (this.closed || this.clients.size >= MAX_CLIENTS) {
      s.end();
      return;
    }
    this.clients.add(s);
    void checkPeer((s as unknown as { fd: number }).fd, process.pid).then((v) => {
      if (v.refused !== undefined) {
        // Logged, but not once per attempt: a sandboxed command that connects in a loop must not flood the log.
        if (++this.refusals <= 5 || this.refusals % 100 === 0)
          log.warn("local approver: a connection was refused", { pid: v.pid, why: v.refused, refusals: this.refusals });
        this.send(s, { type: "refused", reason: `refused: the process ${v.pid} may not answer approval requests: ${v.refused}` });
        this.clients.delete(s);
        s.end();
        return;
      }
      s.data.trusted = true;
      this.send(s, { type: "hello", version: PROTOCOL_VERSION, pid: process.pid, cwd: process.cwd(), timeout_ms: this.timeoutMs });
      for (const id of this.waiting.keys()) this.send(s, this.pendingLine(id));
      this.send(s, { type: "listed" });
      this.handle(s);
    });
  }

  private left(s: Socket<Conn>): void {
    if (s.data?.trusted) this.lastWatcher = Date.now();
    this.clients.delete(s);
  }

  private received(s: Socket<Conn>, d: Buffer): void {
    s.data.buf += d.toString("utf8");
    if (s.data.trusted) this.handle(s);
    else if (s.data.buf.length > 4096) s.end(); // nothing is read before the peer is judged
  }

  private handle(s: Socket<Conn>): void {
    let lines: string[];
    try {
      ({ lines, rest: s.data.buf } = takeLines(s.data.buf));
    } catch {
      s.end();
      return;
    }
    for (const line of lines) {
      const m = parseClientLine(line);
      if (m === undefined) {
        this.send(s, { type: "result", id: "", ok: false, error: "not an answer line" });
        continue;
      }
      const w = this.waiting.get(m.id);
      if (w === undefined) {
        this.send(s, { type: "result", id: m.id, ok: false, error: `no request ${m.id} is waiting (answered, timed out, or unknown)` });
        continue;
      }
      if (m.decision === "session" && w.request.network === undefined) {
        this.send(s, {
          type: "result",
          id: m.id,
          ok: false,
          error: "session is offered for network questions only: answer once, always (where offered) or deny",
        });
        continue;
      }
      if (m.decision === "always" && !w.request.always) {
        this.send(s, {
          type: "result",
          id: m.id,
          ok: false,
          error: "always is not offered for this request (a prompt rule asks for it): answer once or deny",
        });
        continue;
      }
      log.notice("approval answered through the local approver", { id: m.id, decision: m.decision });
      this.drop(m.id, m.decision === "deny" ? "denied" : "approved");
      w.answer(
        m.decision === "deny"
          ? { action: "decline" }
          : w.request.network !== undefined
            ? { action: "accept", content: { scope: m.decision } }
            : m.decision === "always"
              ? { action: "accept", content: { always_allow: true } }
              : { action: "accept", content: {} },
      );
      this.send(s, { type: "result", id: m.id, ok: true });
    }
  }
}
