/**
 * Runs a patched shell wired to an escalation server, as `serve` will: the listener's client socket at fd 3 in
 * the child, `CODEX_ESCALATE_SOCKET=3`, `EXEC_WRAPPER`/`BASH_EXEC_WRAPPER` = the wrapper path.
 */
import type { EscalationListener, EscalationServer, ListenOptions } from "../../src/escalate/server.ts";
import { binaryAs } from "./binary.ts";
import { patchedShell, type ShellName } from "./shells.ts";

/** The compiled binary linked as `codex-execve-wrapper`. */
export function ourWrapper(): string {
  return binaryAs("codex-execve-wrapper");
}

/** Result of one shell run. */
export interface ShellResult {
  exitCode: number;
  stdout: string;
  stderr: string;
  listener: EscalationListener;
}

/** A boundary that lets every escalation through with `baseEnv`: nothing on the host is writable by "the sandbox". */
export function openBoundary(baseEnv: Record<string, string> = {}): ListenOptions["boundary"] {
  return { baseEnv, writable: { full: false, roots: [], readOnly: [] } };
}

/** Options of {@link runInShell}. `boundary` defaults to {@link openBoundary} of the shell's environment. */
export interface RunInShellOptions extends Omit<ListenOptions, "boundary"> {
  boundary?: ListenOptions["boundary"];
  script: string;
  wrapper?: string;
  shell?: ShellName;
  cwd?: string;
  env?: Record<string, string>;
  stdin?: string;
  /** Keep the listener open after the shell exits (the caller closes it). */
  keepOpen?: boolean;
  /** Called with the shell's pid once it has started. */
  onSpawn?: (pid: number, listener: EscalationListener) => void;
}

/**
 * Run `script` in a patched shell whose execs go to `server`. HOME is a folder that does not exist (unless `env`
 * names one): Bun's stdin pipe is a socket, and bash sources `~/.bashrc` for `-c` when its stdin is a socket (it
 * takes itself for a shell started by sshd), so a real HOME would put that file's effects, or a "Permission denied"
 * for one it cannot read (`/root/.bashrc` as another user), into the output under test.
 */
export async function runInShell(server: EscalationServer, o: RunInShellOptions): Promise<ShellResult> {
  const base = { PATH: "/usr/local/bin:/usr/bin:/bin", HOME: "/nonexistent-home", LC_ALL: "C", ...o.env };
  const listener = server.listen({ ...o, boundary: o.boundary ?? openBoundary(base) });
  const env = { ...base, ...listener.shellEnv(o.wrapper ?? ourWrapper(), 3) };
  const p = Bun.spawn([patchedShell(o.shell ?? "bash"), "-c", o.script], {
    env,
    cwd: o.cwd,
    stdio: [o.stdin === undefined ? "ignore" : "pipe", "pipe", "pipe", listener.clientFd],
  });
  listener.releaseClientFd();
  o.onSpawn?.(p.pid, listener);
  // stdin is fed while stdout and stderr are read: a child that writes before it reads all its input never blocks us.
  const fed = o.stdin === undefined ? Promise.resolve() : feed(p.stdin as import("bun").FileSink, o.stdin);
  const [stdout, stderr, exitCode] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited, fed]);
  if (!o.keepOpen) await listener.close();
  return { exitCode, stdout, stderr, listener };
}

/** Writes `data` to `sink` and closes it; resolves once the pipe took it all (rejects when the pipe broke). */
async function feed(sink: import("bun").FileSink, data: string | Uint8Array): Promise<void> {
  await sink.write(data);
  await sink.end();
}
