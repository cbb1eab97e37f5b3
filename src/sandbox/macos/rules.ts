/**
 * The fixed Seatbelt (SBPL) rules shellmcp emits on macOS, each with a stable id. Every id is traced to the Codex
 * rule it mirrors in docs/seatbelt.md (a test checks both directions), so a reviewer can see that the policy we
 * generate means what Codex's `seatbelt_base_policy.sbpl`, `seatbelt_network_policy.sbpl` and
 * `restricted_read_only_platform_defaults.sbpl` mean, rule by rule. The text is written for shellmcp: rules are
 * grouped and ordered by what they are for, sysctl names are sorted, comments are ours. Seatbelt allow rules are a
 * union, so grouping and order do not change what a rule grants.
 *
 * Nothing here contains a path that comes from the user: paths of the policy (writable roots, readable roots,
 * carve-outs) are passed as `-D` parameters by seatbelt.ts and named with `(param "…")`, never spliced in.
 */

/** One top-level SBPL form and its id (`B…` base, `N…` network, `P…` platform defaults). */
export interface SeatbeltRule {
  id: string;
  /** Why the rule exists, one line (becomes the `;` comment above it). */
  why: string;
  /** The SBPL form(s). */
  sbpl: string;
}

const SYSCTL_NAMES = [
  "hw.activecpu",
  "hw.busfrequency_compat",
  "hw.byteorder",
  "hw.cacheconfig",
  "hw.cachelinesize_compat",
  "hw.cpufamily",
  "hw.cpufrequency",
  "hw.cpufrequency_compat",
  "hw.cputype",
  "hw.l1dcachesize_compat",
  "hw.l1icachesize_compat",
  "hw.l2cachesize_compat",
  "hw.l3cachesize_compat",
  "hw.logicalcpu",
  "hw.logicalcpu_max",
  "hw.machine",
  "hw.memsize",
  "hw.model",
  "hw.ncpu",
  "hw.nperflevels",
  "hw.packages",
  "hw.pagesize",
  "hw.pagesize_compat",
  "hw.physicalcpu",
  "hw.physicalcpu_max",
  "hw.tbfrequency_compat",
  "hw.vectorunit",
  "kern.argmax",
  "kern.hostname",
  "kern.maxfilesperproc",
  "kern.maxproc",
  "kern.osproductversion",
  "kern.osrelease",
  "kern.ostype",
  "kern.osvariant_status",
  "kern.osversion",
  "kern.secure_kernel",
  "kern.usrstack64",
  "kern.version",
  "machdep.cpu.brand_string",
  "sysctl.proc_cputype",
  "vm.loadavg",
];
const SYSCTL_PREFIXES = ["hw.optional.arm.", "hw.optional.armv8_", "hw.perflevel", "kern.proc.pgrp.", "kern.proc.pid.", "net.routetable."];

const list = (items: string[], indent = "  "): string => items.map((i) => indent + i).join("\n");

/** The base rules: always present, first in every policy. `(version 1)` is emitted before them. */
export const BASE_RULES: SeatbeltRule[] = [
  { id: "B01", why: "closed by default: anything not allowed below is refused", sbpl: "(deny default)" },
  {
    id: "B02",
    why: "programs may start other programs; children stay in this sandbox",
    sbpl: "(allow process-fork)\n(allow process-exec)",
  },
  {
    id: "B03",
    why: "/bin/ps is setuid; it runs outside the sandbox so that `brew shellenv` can find the shell",
    sbpl: '(allow process-exec (path "/bin/ps") (with no-sandbox))',
  },
  {
    id: "B04",
    why: "signals and process information only towards processes of this sandbox",
    sbpl: "(allow signal (target same-sandbox))\n(allow process-info* (target same-sandbox))",
  },
  {
    id: "B05",
    why: "writing to /dev/null, when it is the real character device",
    sbpl: '(allow file-write-data (require-all (path "/dev/null") (vnode-type CHARACTER-DEVICE)))',
  },
  {
    id: "B06",
    why: "the sysctls runtimes read to learn about the machine (CPU count and features, page size, OS version)",
    sbpl: `(allow sysctl-read\n${list(SYSCTL_NAMES.map((n) => `(sysctl-name "${n}")`))}\n${list(SYSCTL_PREFIXES.map((p) => `(sysctl-name-prefix "${p}")`))})`,
  },
  {
    id: "B07",
    why: "Java asks for its CPU type through a sysctl write (a read in disguise)",
    sbpl: '(allow sysctl-write (sysctl-name "kern.grade_cputype"))',
  },
  { id: "B08", why: "IOKit power-management client", sbpl: '(allow iokit-open (iokit-registry-entry-class "RootDomainUserClient"))' },
  {
    id: "B09",
    why: "user and group lookups (getpwuid and friends), and power-management queries",
    sbpl: '(allow mach-lookup\n  (global-name "com.apple.system.opendirectoryd.libinfo")\n  (global-name "com.apple.PowerManagement.control"))',
  },
  { id: "B10", why: "POSIX semaphores (Python multiprocessing locks)", sbpl: "(allow ipc-posix-sem)" },
  {
    id: "B11",
    why: "the shared-memory names OpenMP (libomp, PyTorch) registers itself under",
    sbpl: '(allow ipc-posix-shm-read-data ipc-posix-shm-write-create ipc-posix-shm-write-unlink\n  (ipc-posix-name-regex #"^/__KMP_REGISTERED_LIB_[0-9]+$"))',
  },
  {
    id: "B12",
    why: "pseudo-terminals: open new ones, use the ones created inside, ioctl on ones inherited",
    sbpl: [
      "(allow pseudo-tty)",
      '(allow file-read* file-write* file-ioctl (literal "/dev/ptmx"))',
      '(allow file-read* file-write* (require-all (regex #"^/dev/ttys[0-9]+") (extension "com.apple.sandbox.pty")))',
      '(allow file-ioctl (regex #"^/dev/ttys[0-9]+"))',
    ].join("\n"),
  },
  {
    id: "B13",
    why: "reading user preferences (cfprefs), never writing them",
    sbpl: [
      "(allow user-preference-read)",
      '(allow ipc-posix-shm-read* (ipc-posix-name-prefix "apple.cfprefs."))',
      '(allow mach-lookup\n  (global-name "com.apple.cfprefsd.daemon")\n  (global-name "com.apple.cfprefsd.agent")\n  (local-name "com.apple.cfprefsd.agent"))',
    ].join("\n"),
  },
];

/** Added when the network is on (after `(allow network-outbound)` / `(allow network-inbound)`, rule N01). */
export const NETWORK_RULES: SeatbeltRule[] = [
  { id: "N01", why: "network on: any outbound connection, any inbound one", sbpl: "(allow network-outbound)\n(allow network-inbound)" },
  {
    id: "N02",
    why: "AF_SYSTEM sockets of protocol 2 only (system notifications used by networking libraries)",
    sbpl: "(allow system-socket (require-all (socket-domain AF_SYSTEM) (socket-protocol 2)))",
  },
  {
    id: "N03",
    why: "the system services DNS, TLS certificate checks and network configuration go through",
    sbpl: `(allow mach-lookup\n${list(
      [
        "com.apple.bsd.dirhelper",
        "com.apple.system.opendirectoryd.membership",
        "com.apple.SecurityServer",
        "com.apple.networkd",
        "com.apple.ocspd",
        "com.apple.trustd.agent",
        "com.apple.SystemConfiguration.DNSConfiguration",
        "com.apple.SystemConfiguration.configd",
      ].map((n) => `(global-name "${n}")`),
    )})`,
  },
  { id: "N04", why: "reading the routing table", sbpl: '(allow sysctl-read (sysctl-name-regex #"^net.routetable"))' },
];

const sub = (paths: string[]): string => list(paths.map((p) => `(subpath "${p}")`));
const lit = (paths: string[]): string => list(paths.map((p) => `(literal "${p}")`));
const FRAMEWORK_DIRS = [
  "/Library/Apple/System/Library/Frameworks",
  "/Library/Apple/System/Library/PrivateFrameworks",
  "/Library/Apple/usr/lib",
  "/System/Library/Frameworks",
  "/System/Library/PrivateFrameworks",
  "/System/Library/SubFrameworks",
  "/System/iOSSupport/System/Library/Frameworks",
  "/System/iOSSupport/System/Library/PrivateFrameworks",
  "/System/iOSSupport/System/Library/SubFrameworks",
  "/usr/lib",
];

/**
 * What a program needs to start when reads are restricted and the policy asks for the platform defaults
 * (`include_platform_defaults`, or a 0.169 profile's `:minimal`). Emitted only when reads are restricted.
 */
export const PLATFORM_DEFAULT_RULES: SeatbeltRule[] = [
  {
    id: "P01",
    why: "system libraries, shared data, preferences and databases (time zones, directory records)",
    sbpl: `(allow file-read* file-test-existence\n${sub(["/Library/Apple", "/Library/Filesystems/NetFSPlugins", "/Library/Preferences", "/Library/Preferences/Logging", "/usr/lib", "/usr/share", "/var/db", "/private/var/db", "/private/var/db/timezone", "/private/var/db/DarwinDirectory/local/recordStore.data"])})`,
  },
  {
    id: "P02",
    why: "the loader maps system frameworks and dylibs as code",
    sbpl: `(allow file-map-executable\n${sub([...FRAMEWORK_DIRS, "/System/Library/Extensions"])})`,
  },
  { id: "P03", why: "framework resources", sbpl: `(allow file-read* file-test-existence\n${sub(FRAMEWORK_DIRS)})` },
  {
    id: "P04",
    why: "stat of the top-level symlinks, of the firmlink parents, and of /private/etc/localtime",
    sbpl: `(allow file-read-metadata file-test-existence\n${lit(["/etc", "/tmp", "/var", "/private/etc/localtime"])}\n  (path-ancestors "/System/Volumes/Data/private"))`,
  },
  { id: "P05", why: "the root folder itself (getcwd walks up to it)", sbpl: '(allow file-read* file-test-existence (literal "/"))' },
  {
    id: "P06",
    why: "random devices, autofs probe, and the account/protocol/service tables",
    sbpl: `(allow file-read* file-test-existence\n${lit(["/dev/autofs_nowait", "/dev/random", "/dev/urandom", "/private/etc/master.passwd", "/private/etc/passwd", "/private/etc/protocols", "/private/etc/services"])})`,
  },
  {
    id: "P07",
    why: "device files every program uses: null, zero, the fd folder, the dtrace helper",
    sbpl: [
      `(allow file-read* file-test-existence file-write-data\n${lit(["/dev/null", "/dev/zero"])})`,
      '(allow file-read-data file-test-existence file-write-data (subpath "/dev/fd"))',
      '(allow file-read* file-test-existence file-write-data file-ioctl (literal "/dev/dtracehelper"))',
    ].join("\n"),
  },
  {
    id: "P08",
    why: "scratch space: the system temporary folders are readable and writable",
    sbpl: [
      '(allow file-read* file-test-existence file-write* (subpath "/tmp"))',
      `(allow file-read* file-write*\n${sub(["/private/tmp", "/var/tmp", "/private/var/tmp"])})`,
    ].join("\n"),
  },
  {
    id: "P09",
    why: "configuration folders, shared libraries of package managers, applications",
    sbpl: `(allow file-read*\n${sub(["/etc", "/private/etc", "/Library/Preferences", "/opt/homebrew/lib", "/usr/local/lib", "/Applications"])})`,
  },
  {
    id: "P10",
    why: "the files that say which macOS this is, and the eligibility (regulatory) plist",
    sbpl: `(allow file-read* file-test-existence\n${lit(["/System/Library/CoreServices", "/System/Library/CoreServices/.SystemVersionPlatform.plist", "/System/Library/CoreServices/SystemVersion.plist"])})\n(allow file-read* (literal "/private/var/db/eligibilityd/eligibility.plist"))`,
  },
  {
    id: "P11",
    why: "stat anywhere under /var (start-up code looks there)",
    sbpl: `(allow file-read-metadata\n${sub(["/var", "/private/var"])})`,
  },
  {
    id: "P12",
    why: "the system programs: their contents and metadata (enough to exec them)",
    sbpl: `(allow file-read-data file-read-metadata\n${sub(["/bin", "/sbin", "/usr/bin", "/usr/sbin", "/usr/libexec"])})`,
  },
  {
    id: "P13",
    why: "terminal basics: standard fds, /dev/tty, ptys, and stat of the device folder",
    sbpl: [
      '(allow file-read* (regex "^/dev/fd/(0|1|2)$"))',
      '(allow file-write* (regex "^/dev/fd/(1|2)$"))',
      `(allow file-read* file-write*\n${lit(["/dev/null", "/dev/tty", "/dev/ptmx"])}\n  (regex "^/dev/ttys[0-9]+$"))`,
      '(allow file-ioctl (regex "^/dev/ttys[0-9]+$"))',
      `(allow file-read-metadata\n${lit(["/dev", "/dev/stdin", "/dev/stdout", "/dev/stderr"])}\n  (regex "^/dev/.*$")\n  (regex "^/dev/tty[^/]*$")\n  (regex "^/dev/pty[^/]*$"))`,
    ].join("\n"),
  },
  {
    id: "P14",
    why: "stat of the data-volume folders a firmlinked path passes through; the filters are alternatives, so (as in Codex) the metadata of every folder",
    sbpl: `(allow file-read-metadata\n${lit(["/System/Volumes", "/System/Volumes/Data", "/System/Volumes/Data/Users"])}\n  (vnode-type DIRECTORY))`,
  },
  {
    id: "P15",
    why: "files handed over with an app-sandbox extension (e.g. from an open panel)",
    sbpl: '(allow file-read* (extension "com.apple.app-sandbox.read"))\n(allow file-read* file-write* (extension "com.apple.app-sandbox.read-write"))',
  },
];

/** Ids of the rules seatbelt.ts builds from the plan (paths as parameters). */
export const DYNAMIC_RULE_IDS = {
  fullRead: "R01",
  restrictedRead: "R02",
  fullWrite: "W01",
  rootsWrite: "W02",
  proxyOutbound: "N05",
  proxyLocal: "N06",
} as const;

/** Render rules as SBPL: each form preceded by `; [ID] why`. */
export function renderRules(rules: SeatbeltRule[]): string {
  return rules.map((r) => `; [${r.id}] ${r.why}\n${r.sbpl}`).join("\n");
}
