/**
 * Proxy mode for one call (docs/network.md): {@link wireProxy} before the shell starts (under bubblewrap a bridge
 * into the call's network namespace at fixed in-namespace ports, and one more for the rooms; under Landlock and
 * Seatbelt the proxy's own loopback ports), {@link serveProxies} once it runs (the namespace's listeners handed to the
 * proxy, the rooms' grant proxies watched).
 */
import type { ProxySpec } from "../sandbox/backend.ts";
import type { RoomSpec } from "../escalate/rooms/plan.ts";
import type { roomGrantProxies } from "../escalate/rooms/grants.ts";
import { bridgePair, NAMESPACE_PORTS, PROXY_BRIDGE_FD, receiveNamespaceListeners, watchNamespaceListeners } from "../network/bridge.ts";
import { proxyEnvironment } from "../network/env.ts";
import { failIfInjected } from "../fault-injection.ts";
import type { CallControl } from "./call-control.ts";
import type { CallResources, OwnedFd } from "./call-resources.ts";
import type { RunCommandOptions } from "./run-options.ts";

/** Proxy mode's wiring for one call: what the launch and the rooms get, and the bridges to serve. */
export interface ProxyWiring {
  spec?: ProxySpec;
  env?: Record<string, string>;
  /** bubblewrap: the call's bridge (server end, child end at {@link PROXY_BRIDGE_FD}). */
  bridge?: { server: OwnedFd; child: OwnedFd };
  /** bubblewrap: the rooms' bridge, kept for the whole call; `stopWatching` once its server end is watched. */
  roomBridge?: { server: OwnedFd; child: OwnedFd; stopWatching?: () => Promise<void> };
  room?: RoomSpec["proxy"];
}

/**
 * Proxy mode (when `o.networkProxy` is set and the call is sandboxed): under bubblewrap a bridge into the
 * namespace at fixed in-namespace ports (and one more for the rooms); under Landlock and Seatbelt the proxy's own
 * loopback ports (the rooms' too).
 */
export async function wireProxy(o: RunCommandOptions, res: CallResources): Promise<ProxyWiring> {
  if (o.networkProxy === undefined || !o.sandbox.sandboxed) return {};
  const np = o.networkProxy.policy;
  if (o.sandbox.backend.proxyWiring === "bridge") {
    const pair = () => {
      const b = bridgePair();
      return { server: res.fd(b.serverFd), child: res.fd(b.childFd) };
    };
    const bridge = pair();
    const ports = np.enableSocks5 ? { http: NAMESPACE_PORTS.http, socks: NAMESPACE_PORTS.socks } : { http: NAMESPACE_PORTS.http };
    const env = proxyEnvironment(ports, np.allowLocalBinding);
    const roomBridge: NonNullable<ProxyWiring["roomBridge"]> = pair();
    // The worker may still be starting a room with the child end: closed once it has let go of the listener (its
    // rooms killed), then the watching stops (which closes the server end).
    res.hold(async () => {
      await res.listenerClosed?.catch(() => undefined);
      roomBridge.child.close();
      await roomBridge.stopWatching?.();
    });
    failIfInjected("call_bridge");
    const spec = { fd: PROXY_BRIDGE_FD, ports: Object.values(ports) };
    return { spec, env, bridge, roomBridge, room: { ports: spec.ports, bridgeFd: roomBridge.child.fd, env } };
  }
  const ports = await o.networkProxy.listenLoopback();
  const env = proxyEnvironment(ports, np.allowLocalBinding);
  const spec = { ports: Object.values(ports), allowLocalBinding: np.allowLocalBinding };
  return { spec, env, room: { ports: spec.ports, env } };
}

/**
 * Once the shell runs, serve proxy mode's bridges: the namespace's listeners arrive once the inner stage has made them
 * (the call's through `proxy.bridge`, the rooms' through `proxy.roomBridge`, watched until the call ends) and the
 * proxy accepts on them; the rooms' grant proxies are watched. A failing call bridge ends the call (fail closed: the
 * namespace has no other way out); the returned `bridgeError` is set then (later, asynchronously) and says why.
 */
export function serveProxies(
  o: Pick<RunCommandOptions, "networkProxy">,
  proxy: ProxyWiring,
  grantProxies: Awaited<ReturnType<typeof roomGrantProxies>>,
  control: CallControl,
): { bridgeError?: string } {
  const proc = control.proc!;
  const state: { bridgeError?: string } = {};
  const adopt = (fds: number[]) => o.networkProxy!.adopt(fds.length === 2 ? { http: fds[0]!, socks: fds[1]! } : { http: fds[0]! });
  const count = proxy.spec?.ports.length ?? 0;
  if (proxy.roomBridge !== undefined) {
    let callEnded: () => void = () => undefined;
    const ended = new Promise<void>((r) => (callEnded = r));
    const watched = watchNamespaceListeners(proxy.roomBridge.server.handOver(), count, (fds) => void adopt(fds), ended);
    proxy.roomBridge.stopWatching = async () => {
      callEnded();
      await watched;
    };
  }
  grantProxies?.watch();
  if (proxy.bridge !== undefined) {
    proxy.bridge.child.close();
    void receiveNamespaceListeners(proxy.bridge.server.handOver(), count, proc.exited)
      .then(adopt)
      .catch((e: unknown) => {
        if (control.exited) return; // ended first: its own output says why
        state.bridgeError = `shellmcp: the network proxy bridge failed, the command was stopped: ${(e as Error).message}\n`;
        control.killAll();
      });
  }
  return state;
}
