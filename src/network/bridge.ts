/**
 * The bridge between a call's private network namespace (bubblewrap `--unshare-net`) and the proxy in the server,
 * with no process of its own (docs/network.md, "Bubblewrap"):
 *
 * 1. the server makes a seqpacket socketpair and gives one end to the sandbox at {@link PROXY_BRIDGE_FD};
 * 2. inside the namespace, before seccomp, this binary's inner stage makes listening TCP sockets on
 *    `127.0.0.1:<port>` for each of {@link NAMESPACE_PORTS} (bubblewrap has brought `lo` up), sends them to the
 *    server in one `SCM_RIGHTS` message, closes its copies and the socketpair end, then installs seccomp and execs;
 * 3. the server accepts on those listeners (they belong to the sandbox's namespace) and dials out from its own.
 * The namespace then has no route anywhere but those two ports. Anything failing on the way stops the call: the
 * inner stage exits 101 before the command runs, or the server kills the call (fail closed, never widened).
 */
import * as libc from "../../ffi/libc.ts";
import { ShellmcpError } from "../errors.ts";

/** fd number at which the sandbox receives its end of the bridge socketpair. */
export const PROXY_BRIDGE_FD = 5;

/**
 * Ports of the proxy inside a call's network namespace: HTTP, then SOCKS5 (Codex's standalone defaults; the
 * namespace is private, so fixed ports cannot collide with anything).
 */
export const NAMESPACE_PORTS = { http: 3128, socks: 8081 } as const;

/** Pending connections each namespace listener queues before the server accepts. */
const BACKLOG = 512;
/** Bytes that tag the listeners message. */
const TAG = new TextEncoder().encode("shellmcp-proxy-listeners");
/** How long the server waits for the listeners once the sandbox has started, ms. */
export const BRIDGE_TIMEOUT_MS = 15_000;

/** The server's end and the sandbox's end of a new bridge (both CLOEXEC; the spawn maps the child's end). */
export function bridgePair(): { serverFd: number; childFd: number } {
  const [serverFd, childFd] = libc.socketpair(libc.SOCK.AF_UNIX, libc.SOCK.SOCK_SEQPACKET | libc.SOCK.SOCK_CLOEXEC);
  libc.setNonblock(serverFd, true);
  return { serverFd, childFd };
}

/**
 * Inner stage, inside the namespace: listen on 127.0.0.1 at each of `ports` and send the listeners over `fd` (then
 * close them and `fd`). Throws `SANDBOX_UNAVAILABLE` when a listener cannot be made or sent.
 */
export function sendNamespaceListeners(fd: number, ports: readonly number[]): void {
  const fds: number[] = [];
  try {
    for (const p of ports) fds.push(libc.listenLoopbackTcp(p, BACKLOG));
    libc.sendmsg(fd, TAG, fds);
  } catch (e) {
    throw new ShellmcpError(
      "SANDBOX_UNAVAILABLE",
      `cannot build the network proxy bridge inside the sandbox: ${(e as Error).message}`,
      {},
      { cause: e },
    );
  } finally {
    fds.forEach(libc.closeQuiet);
    libc.closeQuiet(fd);
  }
}

/**
 * Server side, for the escalation rooms of a call (each room is a namespace of its own that sends its listeners
 * over the same socketpair, as many times as rooms start): hand every message's `count` listeners to `onListeners`
 * until `until` resolves, then close `serverFd`. Polls the non-blocking socket (at most every 20 ms while idle).
 */
export async function watchNamespaceListeners(
  serverFd: number,
  count: number,
  onListeners: (fds: number[]) => void,
  until: Promise<unknown>,
): Promise<void> {
  let done = false;
  void until.then(() => (done = true));
  try {
    for (let wait = 1; !done;) {
      let got = false;
      try {
        const r = libc.recvmsg(serverFd, TAG.length, count, libc.SOCK.MSG_DONTWAIT);
        if (r.fds.length === count && Buffer.from(r.bytes).equals(Buffer.from(TAG))) onListeners(r.fds);
        else r.fds.forEach(libc.closeQuiet);
        got = r.bytes.length > 0 || r.fds.length > 0;
        if (!got) return; // every sender end is closed
      } catch (e) {
        if (!(e instanceof ShellmcpError) || e.data.errname !== "EAGAIN") return;
      }
      wait = got ? 1 : Math.min(wait * 2, 20);
      if (!got) await Bun.sleep(wait);
    }
  } finally {
    libc.closeQuiet(serverFd);
  }
}

/**
 * Server side: wait (polling the non-blocking `serverFd`, never blocking the event loop) for the listeners sent by
 * {@link sendNamespaceListeners}, at most `timeoutMs` or until `gone` resolves (the sandbox ended). Resolves with
 * the fds (`count` of them); rejects with `SANDBOX_UNAVAILABLE` otherwise. Closes `serverFd` either way.
 */
export async function receiveNamespaceListeners(
  serverFd: number,
  count: number,
  gone: Promise<unknown>,
  timeoutMs = BRIDGE_TIMEOUT_MS,
): Promise<number[]> {
  let ended = false;
  void gone.then(() => (ended = true));
  const deadline = performance.now() + timeoutMs;
  try {
    for (let wait = 1; ; wait = Math.min(wait * 2, 20)) {
      try {
        const r = libc.recvmsg(serverFd, TAG.length, count, libc.SOCK.MSG_DONTWAIT);
        if (r.fds.length === count && Buffer.from(r.bytes).equals(Buffer.from(TAG))) return r.fds;
        r.fds.forEach(libc.closeQuiet);
        throw new ShellmcpError("SANDBOX_UNAVAILABLE", "the sandbox sent no proxy listeners (it ended before building the bridge)");
      } catch (e) {
        if (!(e instanceof ShellmcpError) || e.data.errname !== "EAGAIN") throw e;
      }
      if (ended) throw new ShellmcpError("SANDBOX_UNAVAILABLE", "the sandbox ended before building the network proxy bridge");
      if (performance.now() > deadline)
        throw new ShellmcpError("SANDBOX_UNAVAILABLE", `the sandbox built no network proxy bridge within ${timeoutMs} ms`);
      await Bun.sleep(wait);
    }
  } finally {
    libc.closeQuiet(serverFd);
  }
}
