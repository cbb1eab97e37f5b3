/**
 * Waiting for things to happen without sleeping: kernel events (a pidfd becomes readable when its process ends,
 * a socket when data or EOF arrives) polled in a worker thread, and named pipes as "I got here" signals from
 * a shell script to the test. Every wait has a deadline, after which it reports what did not happen.
 */
import { spawnSync } from "node:child_process";
import * as libc from "../../ffi/libc.ts";

/** Default deadline of the waits, in ms: long enough for a loaded machine, short of the test timeout. */
export const WAIT_DEADLINE_MS = 10_000;

/** For each fd, whether it became readable within `timeoutMs` (poll(2) in a worker thread). */
export function readableWithin(fds: readonly number[], timeoutMs = WAIT_DEADLINE_MS): Promise<boolean[]> {
  if (fds.length === 0) return Promise.resolve([]);
  const worker = new Worker(new URL("./poll-worker.ts", import.meta.url).href);
  return new Promise<boolean[]>((resolve, reject) => {
    worker.onmessage = (e: MessageEvent<boolean[]>) => {
      worker.terminate();
      resolve(e.data);
    };
    worker.onerror = (e) => {
      worker.terminate();
      reject(new Error(`poll worker failed: ${e.message}`));
    };
    worker.postMessage({ fds: [...fds], timeoutMs });
  });
}

/** Wait until every process in `pids` has ended; returns those still running after `timeoutMs` (empty: all gone). */
export async function exitedWithin(pids: readonly number[], timeoutMs = WAIT_DEADLINE_MS): Promise<number[]> {
  const open: { pid: number; fd: number }[] = [];
  for (const pid of pids) {
    try {
      open.push({ pid, fd: libc.pidfdOpen(pid) });
    } catch {
      // ESRCH: already gone.
    }
  }
  try {
    const ready = await readableWithin(
      open.map((o) => o.fd),
      timeoutMs,
    );
    return open.filter((_, i) => !ready[i]).map((o) => o.pid);
  } finally {
    for (const o of open) libc.closeQuiet(o.fd);
  }
}

/**
 * Wait until no process whose command line matches `pattern` (as `pgrep -f`) is left; returns the survivors'
 * "pid cmdline" lines after `timeoutMs` (empty: none left).
 */
export async function noProcessLeft(pattern: string, timeoutMs = WAIT_DEADLINE_MS): Promise<string[]> {
  const alive = new Set(
    await exitedWithin(
      pgrep(pattern).map((line) => Number(line.split(" ")[0])),
      timeoutMs,
    ),
  );
  return pgrep(pattern).filter((line) => alive.has(Number(line.split(" ")[0])));
}

/** `pgrep -a -f pattern`: one "pid cmdline" line per match. */
function pgrep(pattern: string): string[] {
  const out = spawnSync("pgrep", ["-a", "-f", pattern], { encoding: "utf8" }).stdout.trim();
  return out === "" ? [] : out.split("\n");
}

/** Create a named pipe at `path` (mkfifo). */
export function mkfifo(path: string): void {
  const r = spawnSync("mkfifo", [path]);
  if (r.status !== 0) throw new Error(`mkfifo ${path} failed: ${r.stderr}`);
}

/**
 * What a script writes to the named pipe `path` (e.g. `echo up > "$FIFO"`), once the writer closes it; rejects
 * after `timeoutMs`. The read runs in a child (`cat`), so the test's event loop is never blocked on the open.
 */
export async function fifoMessage(path: string, timeoutMs = WAIT_DEADLINE_MS): Promise<string> {
  const p = Bun.spawn(["timeout", `${timeoutMs / 1000}`, "cat", path], { stdout: "pipe", stderr: "pipe" });
  const [text, code] = await Promise.all([new Response(p.stdout).text(), p.exited]);
  if (code !== 0) throw new Error(`no message on ${path} within ${timeoutMs} ms`);
  return text;
}

/** Write `text` to the named pipe `path` once a reader opens it (in a child, so the event loop is not blocked). */
export async function fifoSend(path: string, text = "go\n", timeoutMs = WAIT_DEADLINE_MS): Promise<void> {
  const p = Bun.spawn(["timeout", `${timeoutMs / 1000}`, "sh", "-c", 'printf %s "$1" > "$2"', "sh", text, path]);
  if ((await p.exited) !== 0) throw new Error(`nobody read ${path} within ${timeoutMs} ms`);
}
