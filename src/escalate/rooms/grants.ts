/**
 * Network grants by domain for escalation rooms (issue 30; docs/escalation.md "Rooms: what a room reaches and
 * reads"): `[shellmcp.room_network] npm = ["registry.npmjs.org"]` gives the rooms of `npm` a proxy of their own,
 * allowing exactly those domains (Codex's allow-list patterns, ./policy.ts `normalizePattern`; a local target such
 * as `127.0.0.1` only when listed exactly, as in proxy mode), whatever the call's own network is. In network proxy
 * mode the call's allow- and deny-lists are added to the grant's (a grant widens, never narrows, a call's proxy).
 *
 * One proxy per granted program and call, started with the call and closed when it ends, built like the call's own
 * room proxy (docs/network.md, "Escalated programs"): under bubblewrap a bridge (`--unshare-net`, the room's inner
 * stage sends its listeners over the bridge, the server adopts them); under Landlock the proxy's loopback ports,
 * which are the only TCP ports the room may connect to. Refusals are final (nobody is asked: the grant is the
 * answer) and are logged.
 */
import * as libc from "../../../ffi/libc.ts";
import { ShellmcpError } from "../../errors.ts";
import { log } from "../../log.ts";
import { bridgePair, NAMESPACE_PORTS, watchNamespaceListeners } from "../../network/bridge.ts";
import { proxyEnvironment } from "../../network/env.ts";
import { normalizePattern, normalizeTarget, type NetworkPolicy } from "../../network/policy.ts";
import { approvalKey, CallProxy, type ProxyProtocol, type ProxyRefusal } from "../../network/proxy.ts";
import type { RoomSpec } from "./plan.ts";

/** How a room reaches its proxy: the same shape as ./plan.ts `RoomSpec.proxy`. */
export interface RoomProxyEndpoint {
  /** The ports TCP may reach: in the room's namespace (bubblewrap) or the proxy's on the host's loopback (Landlock). */
  ports: number[];
  /** bubblewrap: the bridge's child end (mapped into each room of the program). */
  bridgeFd?: number;
  /** The proxy variables for the program. */
  env: Readonly<Record<string, string>>;
}

/** The grant proxies of one call: an endpoint per program base name, and their lifetime. */
export interface RoomGrantProxies {
  /** Program base name → how its rooms reach their proxy. */
  endpoints: Record<string, RoomProxyEndpoint>;
  /** After the call's shell has started: watch the bridges (bubblewrap) until {@link RoomGrantProxies.end}. */
  watch(): void;
  /**
   * At the end of the call, once no room can start any more: close the bridges' child ends, stop watching, close
   * the proxies. Resolves with every request the proxies refused (for the tool result; empty on a second call).
   * Safe to call twice, and without {@link RoomGrantProxies.watch} (a call that never started).
   */
  end(): Promise<ProxyRefusal[]>;
}

/**
 * The policy of `program`'s grant proxy: its `domains` (normalised; throws `CONFIG` for a pattern no host can
 * match), plus the call's lists in proxy mode (`callPolicy`). SOCKS5 on (git, curl's `ALL_PROXY`); no local target
 * without an exact entry. An exact host with a port (`127.0.0.1:4873`, `[::1]:8080`, `registry.local:443`) allows
 * that port only: it is not put on the allow-list (whose entries cover every port, as Codex's) but returned in
 * `exact` as {@link approvalKey}s for each protocol, which the proxy treats as a person's yes for exactly that
 * destination. A port on a wildcard is ignored (every port), as in Codex's lists.
 */
export function grantPolicy(domains: readonly string[], callPolicy?: NetworkPolicy): { policy: NetworkPolicy; exact: Set<string> } {
  const allow: string[] = [];
  const exact = new Set<string>();
  for (const d of domains) {
    const m = /^\[([^\]]+)\]:(\d+)$/.exec(d.trim()) ?? /^([^:\[\]]+):(\d+)$/.exec(d.trim());
    const host = m === null ? undefined : normalizeTarget(m[1]!)?.host;
    const port = m === null ? NaN : Number(m[2]);
    if (m !== null && host !== undefined && !host.includes("*") && port > 0 && port < 65536)
      for (const protocol of PROTOCOLS) exact.add(approvalKey(host, port, protocol));
    else allow.push(normalizePattern(d, "allow"));
  }
  const policy: NetworkPolicy = {
    enabled: true,
    mode: "full",
    allow: [...new Set([...allow, ...(callPolicy?.allow ?? [])])],
    deny: [...(callPolicy?.deny ?? [])],
    allowLocalBinding: false,
    enableSocks5: true,
    enableSocks5Udp: false,
  };
  return { policy, exact };
}

/** The wire protocols a port-exact grant covers. */
const PROTOCOLS: readonly ProxyProtocol[] = ["http", "https_connect", "socks5_tcp"];

/**
 * Start a proxy for each program of `grants` (program base name → its domains) for one call whose rooms are built
 * by `backend` (`bwrap`: a bridge per program; `landlock`: loopback listeners). `callPolicy`: the call's proxy
 * policy in network proxy mode. Throws what listening throws (the caller then gives the call no such grants: the
 * programs' rooms are refused, see ./build.ts); what it started is closed first.
 */
export async function startRoomGrantProxies(
  grants: Readonly<Record<string, readonly string[]>>,
  backend: "bwrap" | "landlock",
  callPolicy?: NetworkPolicy,
): Promise<RoomGrantProxies> {
  const endpoints: Record<string, RoomProxyEndpoint> = {};
  const proxies: CallProxy[] = [];
  const bridges: { proxy: CallProxy; serverFd: number; childFd: number }[] = [];
  const watchers: Promise<void>[] = [];
  let stop: () => void = () => undefined;
  const stopped = new Promise<void>((r) => (stop = r));
  let ended = false;
  const end = async (): Promise<ProxyRefusal[]> => {
    if (ended) return [];
    ended = true;
    for (const b of bridges) libc.closeQuiet(b.childFd);
    stop();
    await Promise.all(watchers);
    if (watchers.length === 0) for (const b of bridges) libc.closeQuiet(b.serverFd);
    await Promise.all(proxies.map((p) => p.close()));
    const refused = proxies.flatMap((p) => p.refusals);
    if (refused.length > 0) log.info("room grant proxies refused requests", { count: refused.length });
    return refused;
  };
  try {
    for (const [program, domains] of Object.entries(grants)) {
      const g = grantPolicy(domains, callPolicy);
      const proxy = new CallProxy({ policy: g.policy, sessionAllowed: g.exact });
      proxies.push(proxy);
      if (backend === "bwrap") {
        const b = bridgePair();
        bridges.push({ proxy, ...b });
        const ports = { http: NAMESPACE_PORTS.http, socks: NAMESPACE_PORTS.socks };
        endpoints[program] = { ports: [ports.http, ports.socks], bridgeFd: b.childFd, env: proxyEnvironment(ports, false) };
      } else {
        const ports = await proxy.listenLoopback();
        endpoints[program] = { ports: Object.values(ports), env: proxyEnvironment(ports, false) };
      }
    }
  } catch (e) {
    await end();
    throw e;
  }
  return {
    endpoints,
    watch() {
      if (ended || watchers.length > 0) return;
      for (const b of bridges)
        watchers.push(
          watchNamespaceListeners(b.serverFd, 2, (fds) => void b.proxy.adopt({ http: fds[0]!, socks: fds[1]! }), stopped).catch(
            (e: unknown) => log.warn("a room grant's proxy bridge failed", { error: (e as Error).message }),
          ),
        );
    },
    end,
  };
}

/**
 * The grant proxies a call's rooms need under `spec` (the call's room spec): undefined when no program is granted
 * domains, or the rooms are not built by bubblewrap or Landlock (Seatbelt, the host, no room: a domain grant is then
 * refused when a room is planned, see ./plan.ts `roomNetwork`). A failure to start them is logged and
 * gives undefined too (the granted programs' rooms are refused, with the reason, never widened).
 */
export async function roomGrantProxies(spec: RoomSpec, callPolicy?: NetworkPolicy): Promise<RoomGrantProxies | undefined> {
  const grants: Record<string, readonly string[]> = {};
  for (const [program, g] of Object.entries(spec.networkGrants ?? {})) if (Array.isArray(g)) grants[program] = g;
  const kind = spec.backend.kind;
  if (Object.keys(grants).length === 0 || (kind !== "bwrap" && kind !== "landlock") || !spec.call.sandboxed) return undefined;
  try {
    return await startRoomGrantProxies(grants, kind, callPolicy);
  } catch (e) {
    log.warn("cannot start the proxies of [shellmcp.room_network] grants: those programs run inside the sandbox", {
      error: (e as Error).message,
    });
    return undefined;
  }
}

/**
 * Check the domain lists of `[shellmcp.room_network]` (as ../config/config.ts `escalationConfig` read them) with
 * the proxy policy's own pattern rules, so that a pattern no host can match stops the server at start-up, not a
 * room later. Throws `CONFIG` naming the key.
 */
export function checkRoomNetworkGrants(grants: Readonly<Record<string, "host" | "call" | readonly string[]>>): void {
  for (const [program, v] of Object.entries(grants)) {
    if (!Array.isArray(v)) continue;
    for (const d of v)
      try {
        normalizePattern(d, "allow");
      } catch (e) {
        throw new ShellmcpError("CONFIG", `shellmcp.room_network.${program}: ${(e as Error).message}`);
      }
  }
}
