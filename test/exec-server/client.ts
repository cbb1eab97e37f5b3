/**
 * Capability tokens of the servers tests started with shellmcp's default authentication (a token generated at
 * start), by URL: ./codex-harness.ts `startServer` registers them, so that {@link ExecClient.connect} presents the
 * server's own token unless the test passes an `authorization` header itself.
 */
const TOKENS = new Map<string, string>();

/** Remember `token` as the capability token of the server at `url` (see {@link TOKENS}). */
export function registerToken(url: string, token: string): void {
  TOKENS.set(url, token);
}

/** The registered token of `url`, if any. */
export function tokenFor(url: string): string | undefined {
  return TOKENS.get(url);
}

/** A minimal exec-server client for tests: requests by id, notifications buffered. Bun's WebSocket. */
export class ExecClient {
  readonly notifications: Record<string, unknown>[] = [];
  private readonly waiting = new Map<unknown, (m: Record<string, unknown>) => void>();
  private noteWaiters: (() => void)[] = [];
  private nextId = 1;
  closed = false;
  closedPromise: Promise<void>;

  private constructor(readonly ws: WebSocket) {
    ws.onmessage = (ev) => {
      const m = JSON.parse(String(ev.data)) as Record<string, unknown>;
      if ("id" in m) {
        this.waiting.get(m.id)?.(m);
        this.waiting.delete(m.id);
      } else {
        this.notifications.push(m);
        for (const w of this.noteWaiters.splice(0)) w();
      }
    };
    this.closedPromise = new Promise((r) => {
      ws.onclose = () => {
        this.closed = true;
        r();
      };
    });
  }

  /**
   * Connect (optionally with extra handshake headers). A server started with a generated token gets
   * `Authorization: Bearer <its token>` unless `headers` has an `authorization` of its own.
   */
  static async connect(url: string, headers?: Record<string, string>): Promise<ExecClient> {
    const token = TOKENS.get(url);
    if (token !== undefined && !Object.keys(headers ?? {}).some((k) => k.toLowerCase() === "authorization"))
      headers = { authorization: `Bearer ${token}`, ...headers };
    const ws = new WebSocket(url, headers === undefined ? undefined : ({ headers } as unknown as string[]));
    await new Promise<void>((resolve, reject) => {
      ws.onopen = () => resolve();
      ws.onerror = () => reject(new Error("websocket handshake failed"));
    });
    return new ExecClient(ws);
  }

  /** Send a request; resolves with the whole response (`result` or `error`). */
  request(method: string, params: unknown): Promise<Record<string, unknown>> {
    const id = this.nextId++;
    const p = new Promise<Record<string, unknown>>((r) => this.waiting.set(id, r));
    this.ws.send(JSON.stringify({ id, method, params }));
    return p;
  }

  /** `request` that must succeed; returns `result`. */
  async call(method: string, params: unknown): Promise<Record<string, unknown>> {
    const r = await this.request(method, params);
    if (r.error !== undefined) throw new Error(`${method}: ${JSON.stringify(r.error)}`);
    return r.result as Record<string, unknown>;
  }

  notify(method: string, params: unknown): void {
    this.ws.send(JSON.stringify({ method, params }));
  }

  /** initialize + initialized; returns the session id. */
  async init(resumeSessionId?: string): Promise<string> {
    const r = await this.call("initialize", { clientName: "test", resumeSessionId: resumeSessionId ?? null });
    this.notify("initialized", {});
    return r.sessionId as string;
  }

  /** Wait for a notification matching `pred` (already received ones count). */
  async waitFor(pred: (m: Record<string, unknown>) => boolean, timeoutMs = 20_000): Promise<Record<string, unknown>> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const m = this.notifications.find(pred);
      if (m !== undefined) return m;
      if (Date.now() > deadline) throw new Error("timed out waiting for a notification");
      await new Promise<void>((r) => {
        this.noteWaiters.push(r);
        setTimeout(r, 100);
      });
    }
  }

  /** Wait for `process/closed` of `processId`; returns the decoded output and exit code. */
  async collect(processId: string): Promise<{ output: string; exitCode: number | undefined }> {
    await this.waitFor((m) => m.method === "process/closed" && (m.params as { processId: string }).processId === processId);
    const mine = this.notifications.filter((m) => (m.params as { processId?: string }).processId === processId);
    const output = mine
      .filter((m) => m.method === "process/output")
      .map((m) => Buffer.from((m.params as { chunk: string }).chunk, "base64").toString())
      .join("");
    const exited = mine.find((m) => m.method === "process/exited");
    return { output, exitCode: (exited?.params as { exitCode?: number } | undefined)?.exitCode };
  }

  close(): void {
    this.ws.close();
  }
}

/** The `sandbox` Codex 0.169 sends under workspace-write (traces §5). */
export function workspaceWrite(proj: string): Record<string, unknown> {
  const special = (kind: string, subpath?: string) => ({ type: "special", value: subpath === undefined ? { kind } : { kind, subpath } });
  return {
    permissions: {
      type: "managed",
      file_system: {
        type: "restricted",
        entries: [
          { path: special("root"), access: "read" },
          { path: special("project_roots"), access: "write" },
          { path: special("slash_tmp"), access: "write" },
          { path: special("tmpdir"), access: "write" },
          ...[".git", ".agents", ".codex", ".aws"].map((s) => ({
            path: special("project_roots", s),
            access: "read",
            missing_path_behavior: "skip",
          })),
        ],
      },
      network: "restricted",
    },
    cwd: `file://${proj}`,
    workspaceRoots: [`file://${proj}`],
    windowsSandboxLevel: "disabled",
    windowsSandboxProxySettingsMode: "reconcile",
    useLegacyLandlock: false,
  };
}
