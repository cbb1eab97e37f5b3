/**
 * The restricted Pod Security Standard (Kubernetes v1.32, kubernetes.io/docs/concepts/security/pod-security-standards,
 * "Baseline" and "Restricted" policies) as a table of checks on a PodSpec (issue 44: no maintained implementation is
 * on npm here; the names are the standard's control names as Pod Security Admission reports them). Windows-only
 * controls (hostProcess) and fields no Linux pod here sets are checked as "must be absent or the allowed value".
 */
type Obj = Record<string, any>;

/** One control: its name, the rule in the standard's words, and the check (a reason when violated). */
export interface PssRule {
  name: string;
  level: "baseline" | "restricted";
  rule: string;
  check(pod: Obj): string | undefined;
}

const containersOf = (pod: Obj): Obj[] => [...(pod.containers ?? []), ...(pod.initContainers ?? []), ...(pod.ephemeralContainers ?? [])];
const first = (pod: Obj, f: (c: Obj) => string | undefined): string | undefined => {
  for (const c of containersOf(pod)) {
    const why = f(c);
    if (why !== undefined) return `container ${c.name}: ${why}`;
  }
  return undefined;
};
const SAFE_SYSCTLS = new Set([
  "kernel.shm_rmid_forced",
  "net.ipv4.ip_local_port_range",
  "net.ipv4.ip_unprivileged_port_start",
  "net.ipv4.tcp_syncookies",
  "net.ipv4.ping_group_range",
  "net.ipv4.ip_local_reserved_ports",
  "net.ipv4.tcp_keepalive_time",
  "net.ipv4.tcp_fin_timeout",
  "net.ipv4.tcp_keepalive_intvl",
  "net.ipv4.tcp_keepalive_probes",
]);
const BASELINE_CAPS = new Set([
  "AUDIT_WRITE",
  "CHOWN",
  "DAC_OVERRIDE",
  "FOWNER",
  "FSETID",
  "KILL",
  "MKNOD",
  "NET_BIND_SERVICE",
  "SETFCAP",
  "SETGID",
  "SETPCAP",
  "SETUID",
  "SYS_CHROOT",
]);
const RESTRICTED_VOLUMES = new Set([
  "configMap",
  "csi",
  "downwardAPI",
  "emptyDir",
  "ephemeral",
  "persistentVolumeClaim",
  "projected",
  "secret",
]);

/** The controls, baseline first, in the standard's order. */
export const RESTRICTED_RULES: PssRule[] = [
  {
    name: "hostProcess",
    level: "baseline",
    rule: "windowsOptions.hostProcess must be unset or false",
    check: (p) =>
      p.securityContext?.windowsOptions?.hostProcess === true
        ? "pod hostProcess"
        : first(p, (c) => (c.securityContext?.windowsOptions?.hostProcess === true ? "hostProcess" : undefined)),
  },
  {
    name: "hostNamespaces",
    level: "baseline",
    rule: "hostNetwork, hostPID, hostIPC must be unset or false",
    check: (p) => (p.hostNetwork === true || p.hostPID === true || p.hostIPC === true ? "host namespace shared" : undefined),
  },
  {
    name: "privileged",
    level: "baseline",
    rule: "securityContext.privileged must be unset or false",
    check: (p) => first(p, (c) => (c.securityContext?.privileged === true ? "privileged" : undefined)),
  },
  {
    name: "capabilitiesBaseline",
    level: "baseline",
    rule: "capabilities.add only from the baseline list",
    check: (p) => first(p, (c) => ((c.securityContext?.capabilities?.add ?? []) as string[]).find((x) => !BASELINE_CAPS.has(x))),
  },
  {
    name: "hostPathVolumes",
    level: "baseline",
    rule: "no hostPath volume",
    check: (p) => (((p.volumes ?? []) as Obj[]).some((v) => v.hostPath !== undefined) ? "hostPath volume" : undefined),
  },
  {
    name: "hostPorts",
    level: "baseline",
    rule: "hostPort unset or 0",
    check: (p) => first(p, (c) => (((c.ports ?? []) as Obj[]).some((x) => (x.hostPort ?? 0) !== 0) ? "hostPort" : undefined)),
  },
  {
    name: "appArmorProfile",
    level: "baseline",
    rule: "appArmorProfile.type unset, RuntimeDefault or Localhost",
    check: (p) =>
      [p.securityContext?.appArmorProfile?.type, ...containersOf(p).map((c) => c.securityContext?.appArmorProfile?.type)].some(
        (t) => t !== undefined && t !== "RuntimeDefault" && t !== "Localhost",
      )
        ? "Unconfined AppArmor"
        : undefined,
  },
  {
    name: "seLinuxOptions",
    level: "baseline",
    rule: "seLinuxOptions.type only container_t/container_init_t/container_kvm_t/container_engine_t, user and role unset",
    check: (p) =>
      [p.securityContext?.seLinuxOptions, ...containersOf(p).map((c) => c.securityContext?.seLinuxOptions)].some(
        (o: Obj | undefined) =>
          o !== undefined &&
          (o.user !== undefined ||
            o.role !== undefined ||
            (o.type !== undefined && !["container_t", "container_init_t", "container_kvm_t", "container_engine_t"].includes(o.type))),
      )
        ? "seLinuxOptions"
        : undefined,
  },
  {
    name: "procMount",
    level: "baseline",
    rule: "procMount unset or Default",
    check: (p) =>
      first(p, (c) => (c.securityContext?.procMount !== undefined && c.securityContext.procMount !== "Default" ? "procMount" : undefined)),
  },
  {
    name: "seccompBaseline",
    level: "baseline",
    rule: "seccompProfile.type must not be Unconfined",
    check: (p) =>
      [p.securityContext?.seccompProfile?.type, ...containersOf(p).map((c) => c.securityContext?.seccompProfile?.type)].includes(
        "Unconfined",
      )
        ? "Unconfined seccomp"
        : undefined,
  },
  {
    name: "sysctls",
    level: "baseline",
    rule: "only the safe sysctls",
    check: (p) => ((p.securityContext?.sysctls ?? []) as Obj[]).find((s) => !SAFE_SYSCTLS.has(s.name))?.name,
  },
  {
    name: "volumeTypes",
    level: "restricted",
    rule: "volumes only configMap, csi, downwardAPI, emptyDir, ephemeral, persistentVolumeClaim, projected, secret",
    check: (p) =>
      ((p.volumes ?? []) as Obj[])
        .map((v) => Object.keys(v).find((k) => k !== "name"))
        .find((k) => k === undefined || !RESTRICTED_VOLUMES.has(k)),
  },
  {
    name: "privilegeEscalation",
    level: "restricted",
    rule: "allowPrivilegeEscalation must be false in every container",
    check: (p) =>
      first(p, (c) => (c.securityContext?.allowPrivilegeEscalation === false ? undefined : "allowPrivilegeEscalation not false")),
  },
  {
    name: "runAsNonRoot",
    level: "restricted",
    rule: "runAsNonRoot true (pod, or every container)",
    check: (p) =>
      first(p, (c) =>
        c.securityContext?.runAsNonRoot === false || (c.securityContext?.runAsNonRoot !== true && p.securityContext?.runAsNonRoot !== true)
          ? "runAsNonRoot not true"
          : undefined,
      ),
  },
  {
    name: "runAsUser",
    level: "restricted",
    rule: "runAsUser must not be 0",
    check: (p) =>
      p.securityContext?.runAsUser === 0
        ? "pod runAsUser 0"
        : first(p, (c) => (c.securityContext?.runAsUser === 0 ? "runAsUser 0" : undefined)),
  },
  {
    name: "seccompProfile",
    level: "restricted",
    rule: "seccompProfile.type RuntimeDefault or Localhost (pod, or every container)",
    check: (p) =>
      first(p, (c) => {
        const t = c.securityContext?.seccompProfile?.type ?? p.securityContext?.seccompProfile?.type;
        return t === "RuntimeDefault" || t === "Localhost" ? undefined : "seccompProfile not RuntimeDefault/Localhost";
      }),
  },
  {
    name: "capabilities",
    level: "restricted",
    rule: "capabilities.drop includes ALL; add only NET_BIND_SERVICE",
    check: (p) =>
      first(p, (c) => {
        const cap = c.securityContext?.capabilities ?? {};
        if (!((cap.drop ?? []) as string[]).includes("ALL")) return "drop does not include ALL";
        return ((cap.add ?? []) as string[]).find((x) => x !== "NET_BIND_SERVICE");
      }),
  },
];

/** The restricted controls `pod` (a PodSpec) breaks, each `name: reason`, in table order. */
export function restrictedViolations(pod: Obj): string[] {
  const out: string[] = [];
  for (const r of RESTRICTED_RULES) {
    const why = r.check(pod);
    if (why !== undefined) out.push(`${r.name}: ${why}`);
  }
  return out;
}
