/*
 * shellmcp sandbox-exec: applies a prepared Landlock + seccomp plan to itself and execs a command. `serve` starts it
 * for a call's shell under the Landlock backend instead of a second copy of its own executable (a whole Bun start per
 * call, issue 40): the server plans what its helper's in-process path would apply (src/sandbox/linux/sandbox-exec.ts
 * builds the plan from the same functions src/sandbox/linux/in-process.ts `applyInProcess` uses), this program only
 * applies it. Built statically against musl by scripts/build-sandbox-exec.sh and carried inside the executable, like
 * the room launcher.
 *
 * Usage: sandbox-exec --plan-fd N -- PATH-OR-NAME [ARG...]
 *
 * The plan, read from fd N to its end (a pipe; at most 16 MiB; the fd is closed after), little endian:
 *   u32 magic 0x31505853 ("SXP1"), u32 version (1), u32 flags, u32 landlock ABI the plan was made for (0: none),
 *   u64 handled_access_fs, u64 handled_access_net, u64 scoped,
 *   u32 path rule count, u32 port rule count, u32 seccomp program length (bytes),
 *   path rules: u64 allowed access, u32 path length, the path (absolute, no NUL, no terminator),
 *   port rules: u64 allowed access, u64 port,
 *   the seccomp program (struct sock_filter[], 8 bytes each),
 *   and nothing after it.
 * flags: 1 no_new_privs (required), 2 Landlock, 4 drop every capability, 8 seccomp, 16 reset signal dispositions
 * and mask, 32 new session. Every count, length, mask and bound is checked before anything is applied: a plan
 * that does not parse exactly is refused.
 *
 * Steps, in the helper's order (in-process.ts `applyInProcess`, then `execCommand`):
 *   1. every inherited fd from 3 up is marked close-on-exec, except the escalation socket named by
 *      CODEX_ESCALATE_SOCKET (the Bun helper's runtime marks inherited fds so, and keeps only that one);
 *   2. Landlock: no_new_privs, the ruleset (handled masks as planned; the kernel's ABI must be at least the plan's),
 *      each path rule — a path that cannot be stat'ed is skipped (as the helper does), a non-folder keeps only the
 *      rights a file can have, rights are masked by the handled set, a rule left with none is skipped; the path is
 *      opened O_PATH|O_CLOEXEC here, at the call, never by the server —, each port rule, then landlock_restrict_self;
 *   3. every capability dropped: bounding set (until the kernel refuses: not root), ambient set, then capset to
 *      empty effective, permitted and inheritable sets;
 *   4. no_new_privs, and the seccomp filter when planned;
 *   5. signal dispositions to default and an empty signal mask; a new session when planned;
 *   6. the command resolved as the helper does (src/find-executable.ts: names with '/' as given, else the first
 *      regular file with an execute bit on PATH, default /usr/local/bin:/usr/bin:/bin, an empty entry meaning the
 *      current folder) and exec'd with this environment.
 * Any step failing (1 to 5, or a malformed plan or command line): one line on stderr and exit 101, the helper's
 * status when the sandbox cannot be applied; the command is never run. A command that cannot be found or exec'd:
 * a shell-style line on stderr and 127 (not found) or 126, as the helper.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

extern char **environ;

/* Landlock and seccomp ABIs (musl-gcc has no kernel headers). */
#define LANDLOCK_CREATE_RULESET_VERSION (1U << 0)
#define LANDLOCK_RULE_PATH_BENEATH 1
#define LANDLOCK_RULE_NET_PORT 2
#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif
#ifndef SYS_seccomp
#if defined(__x86_64__)
#define SYS_seccomp 317
#elif defined(__aarch64__)
#define SYS_seccomp 277
#endif
#endif
#define SECCOMP_SET_MODE_FILTER 1
#define SYS_close_range_nr 436
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#ifndef PR_CAP_AMBIENT
#define PR_CAP_AMBIENT 47
#define PR_CAP_AMBIENT_CLEAR_ALL 4
#endif

struct landlock_ruleset_attr {
  uint64_t handled_access_fs, handled_access_net, scoped;
};
struct landlock_path_beneath_attr {
  uint64_t allowed_access;
  int32_t parent_fd;
} __attribute__((packed));
struct landlock_net_port_attr {
  uint64_t allowed_access, port;
} __attribute__((packed));
struct sock_filter_ {
  uint16_t code;
  uint8_t jt, jf;
  uint32_t k;
};
struct sock_fprog_ {
  unsigned short len;
  struct sock_filter_ *filter;
};

#define PLAN_MAGIC 0x31505853u
#define PLAN_VERSION 1u
#define F_NO_NEW_PRIVS 1u
#define F_LANDLOCK 2u
#define F_DROP_CAPS 4u
#define F_SECCOMP 8u
#define F_RESET_SIGNALS 16u
#define F_SETSID 32u
#define F_KNOWN 63u
#define MAX_PLAN (1u << 24) /* 16 MiB: 65,536 rules of paths up to ~240 bytes */
#define MAX_PATH_RULES 65536u /* a HOME of thousands of entries beside a hidden store: one rule each */
#define MAX_PORT_RULES 64u
#define MAX_PATH_LEN 4095u
#define MAX_ABI 64u
#define MAX_BPF_INSNS 4096u /* BPF_MAXINSNS */
#define FS_KNOWN 0xffffull
#define NET_KNOWN 3ull
#define SCOPE_KNOWN 3ull
/* Rights valid on a non-folder: EXECUTE, WRITE_FILE, READ_FILE, TRUNCATE, IOCTL_DEV (landlock.ts FILE_RIGHTS). */
#define FILE_RIGHTS (1ull | 2ull | 4ull | 0x4000ull | 0x8000ull)
#define SANDBOX_FAILURE_EXIT 101

struct path_rule {
  uint64_t access;
  char *path;
};
struct port_rule {
  uint64_t access, port;
};
struct plan {
  uint32_t flags, abi;
  struct landlock_ruleset_attr attr;
  uint32_t npath, nport, bpf_len;
  struct path_rule *paths;
  struct port_rule *ports;
  struct sock_filter_ *bpf;
};

/* One line on stderr and the helper's sandbox-failure status: nothing of the command runs. */
__attribute__((noreturn, format(printf, 1, 2))) static void fail(const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  fprintf(stderr, "shellmcp sandbox-exec: %s\n", buf);
  _exit(SANDBOX_FAILURE_EXIT);
}

/* The whole plan from `fd` (to EOF), at most MAX_PLAN bytes; the fd is closed. */
static unsigned char *read_plan(int fd, size_t *len) {
  unsigned char *buf = malloc(MAX_PLAN + 1);
  if (buf == NULL) fail("out of memory");
  size_t n = 0;
  for (;;) {
    ssize_t r = read(fd, buf + n, MAX_PLAN + 1 - n);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) fail("cannot read the plan from fd %d: %s", fd, strerror(errno));
    if (r == 0) break;
    n += (size_t)r;
    if (n > MAX_PLAN) fail("the plan is larger than %u bytes", MAX_PLAN);
  }
  close(fd);
  *len = n;
  return buf;
}

struct reader {
  const unsigned char *p;
  size_t left;
};

static uint32_t rd_u32(struct reader *r, const char *what) {
  if (r->left < 4) fail("malformed plan: it ends inside %s", what);
  uint32_t v = (uint32_t)r->p[0] | (uint32_t)r->p[1] << 8 | (uint32_t)r->p[2] << 16 | (uint32_t)r->p[3] << 24;
  r->p += 4;
  r->left -= 4;
  return v;
}

static uint64_t rd_u64(struct reader *r, const char *what) {
  uint64_t lo = rd_u32(r, what);
  return lo | (uint64_t)rd_u32(r, what) << 32;
}

/* Parse and check `buf` strictly (see the file's comment); refuses (exit 101) anything else. */
static void parse_plan(const unsigned char *buf, size_t len, struct plan *pl) {
  struct reader r = {buf, len};
  if (rd_u32(&r, "the magic") != PLAN_MAGIC) fail("malformed plan: bad magic");
  uint32_t version = rd_u32(&r, "the version");
  if (version != PLAN_VERSION) fail("malformed plan: version %u (this program reads %u)", version, PLAN_VERSION);
  pl->flags = rd_u32(&r, "the flags");
  pl->abi = rd_u32(&r, "the ABI");
  pl->attr.handled_access_fs = rd_u64(&r, "the handled fs access");
  pl->attr.handled_access_net = rd_u64(&r, "the handled net access");
  pl->attr.scoped = rd_u64(&r, "the scopes");
  pl->npath = rd_u32(&r, "the path rule count");
  pl->nport = rd_u32(&r, "the port rule count");
  pl->bpf_len = rd_u32(&r, "the seccomp program length");
  if (pl->flags & ~F_KNOWN) fail("malformed plan: unknown flags 0x%x", pl->flags & ~F_KNOWN);
  if (!(pl->flags & F_NO_NEW_PRIVS)) fail("malformed plan: no_new_privs is not set");
  if (pl->flags & F_LANDLOCK) {
    if (pl->abi < 1 || pl->abi > MAX_ABI) fail("malformed plan: Landlock ABI %u", pl->abi);
    if (pl->attr.handled_access_fs == 0 || (pl->attr.handled_access_fs & ~FS_KNOWN))
      fail("malformed plan: handled fs access 0x%llx", (unsigned long long)pl->attr.handled_access_fs);
    if (pl->attr.handled_access_net & ~NET_KNOWN)
      fail("malformed plan: handled net access 0x%llx", (unsigned long long)pl->attr.handled_access_net);
    if (pl->attr.scoped & ~SCOPE_KNOWN) fail("malformed plan: scopes 0x%llx", (unsigned long long)pl->attr.scoped);
    if (pl->npath > MAX_PATH_RULES) fail("malformed plan: %u path rules (at most %u)", pl->npath, MAX_PATH_RULES);
    if (pl->nport > MAX_PORT_RULES) fail("malformed plan: %u port rules (at most %u)", pl->nport, MAX_PORT_RULES);
    if (pl->nport > 0 && !(pl->attr.handled_access_net & 2)) fail("malformed plan: port rules without handled TCP connect");
  } else if (pl->abi != 0 || pl->attr.handled_access_fs != 0 || pl->attr.handled_access_net != 0 || pl->attr.scoped != 0 ||
             pl->npath != 0 || pl->nport != 0)
    fail("malformed plan: Landlock fields without the Landlock flag");
  if (pl->flags & F_SECCOMP) {
    if (pl->bpf_len == 0 || pl->bpf_len % 8 != 0 || pl->bpf_len / 8 > MAX_BPF_INSNS)
      fail("malformed plan: seccomp program of %u bytes", pl->bpf_len);
  } else if (pl->bpf_len != 0)
    fail("malformed plan: a seccomp program without the seccomp flag");

  pl->paths = calloc(pl->npath + 1, sizeof *pl->paths);
  pl->ports = calloc(pl->nport + 1, sizeof *pl->ports);
  if (pl->paths == NULL || pl->ports == NULL) fail("out of memory");
  for (uint32_t i = 0; i < pl->npath; i++) {
    uint64_t access = rd_u64(&r, "a path rule");
    uint32_t n = rd_u32(&r, "a path rule");
    if (access == 0 || (access & ~pl->attr.handled_access_fs))
      fail("malformed plan: path rule %u grants 0x%llx outside the handled set", i, (unsigned long long)access);
    if (n == 0 || n > MAX_PATH_LEN) fail("malformed plan: path rule %u has a path of %u bytes", i, n);
    if (r.left < n) fail("malformed plan: it ends inside path rule %u", i);
    if (r.p[0] != '/' || memchr(r.p, 0, n) != NULL) fail("malformed plan: path rule %u is not an absolute path", i);
    char *path = malloc((size_t)n + 1);
    if (path == NULL) fail("out of memory");
    memcpy(path, r.p, n);
    path[n] = 0;
    r.p += n;
    r.left -= n;
    pl->paths[i] = (struct path_rule){access, path};
  }
  for (uint32_t i = 0; i < pl->nport; i++) {
    uint64_t access = rd_u64(&r, "a port rule");
    uint64_t port = rd_u64(&r, "a port rule");
    if (access == 0 || (access & ~pl->attr.handled_access_net))
      fail("malformed plan: port rule %u grants 0x%llx outside the handled set", i, (unsigned long long)access);
    if (port > 65535) fail("malformed plan: port rule %u names port %llu", i, (unsigned long long)port);
    pl->ports[i] = (struct port_rule){access, port};
  }
  if (r.left < pl->bpf_len) fail("malformed plan: it ends inside the seccomp program");
  pl->bpf = malloc(pl->bpf_len + 8);
  if (pl->bpf == NULL) fail("out of memory");
  for (uint32_t i = 0; i < pl->bpf_len / 8; i++) {
    const unsigned char *q = r.p + 8 * (size_t)i;
    pl->bpf[i] = (struct sock_filter_){(uint16_t)(q[0] | q[1] << 8), q[2], q[3],
                                       (uint32_t)q[4] | (uint32_t)q[5] << 8 | (uint32_t)q[6] << 16 | (uint32_t)q[7] << 24};
  }
  r.p += pl->bpf_len;
  r.left -= pl->bpf_len;
  if (r.left != 0) fail("malformed plan: %zu bytes after its end", r.left);
}

/* Step 1: inherited fds from 3 up close on exec, but the escalation socket (CODEX_ESCALATE_SOCKET, digits only). */
static void cloexec_inherited(void) {
  if (syscall(SYS_close_range_nr, 3u, ~0u, CLOSE_RANGE_CLOEXEC) != 0) {
    long max = sysconf(_SC_OPEN_MAX);
    if (max < 0 || max > 65536) max = 65536;
    for (int fd = 3; fd < max; fd++) {
      int fl = fcntl(fd, F_GETFD);
      if (fl >= 0 && fcntl(fd, F_SETFD, fl | FD_CLOEXEC) != 0) fail("cannot mark fd %d close-on-exec: %s", fd, strerror(errno));
    }
  }
  const char *v = getenv("CODEX_ESCALATE_SOCKET");
  if (v == NULL) return;
  size_t n = strlen(v);
  if (n == 0 || n > 9 || strspn(v, "0123456789") != n) return;
  int fd = atoi(v);
  int fl = fcntl(fd, F_GETFD);
  if (fl >= 0) fcntl(fd, F_SETFD, fl & ~FD_CLOEXEC); /* not open: the wrapper inside will report it */
}

/* Step 2: the Landlock ruleset, restricting this thread (and so the command). */
static void apply_landlock(const struct plan *pl) {
  long kabi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
  if (kabi < 1) fail("cannot apply the Landlock ruleset: Landlock is not available on this kernel (%s)", strerror(errno));
  if ((uint32_t)kabi < pl->abi) fail("cannot apply the Landlock ruleset: the plan needs ABI %u, this kernel has %ld", pl->abi, kabi);
  int rs = (int)syscall(SYS_landlock_create_ruleset, &pl->attr, sizeof pl->attr, 0);
  if (rs < 0) fail("cannot apply the Landlock ruleset: landlock_create_ruleset: %s", strerror(errno));
  for (uint32_t i = 0; i < pl->npath; i++) {
    struct stat st;
    if (stat(pl->paths[i].path, &st) != 0) continue; /* missing paths are skipped, as Codex does */
    uint64_t access = (S_ISDIR(st.st_mode) ? pl->paths[i].access : pl->paths[i].access & FILE_RIGHTS) & pl->attr.handled_access_fs;
    if (access == 0) continue;
    int fd = open(pl->paths[i].path, O_PATH | O_CLOEXEC);
    if (fd < 0) fail("cannot apply the Landlock ruleset: open %s: %s", pl->paths[i].path, strerror(errno));
    struct landlock_path_beneath_attr pb = {access, fd};
    if (syscall(SYS_landlock_add_rule, rs, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) != 0)
      fail("cannot apply the Landlock ruleset: landlock_add_rule %s: %s", pl->paths[i].path, strerror(errno));
    close(fd);
  }
  for (uint32_t i = 0; i < pl->nport; i++) {
    struct landlock_net_port_attr nb = {pl->ports[i].access, pl->ports[i].port};
    if (syscall(SYS_landlock_add_rule, rs, LANDLOCK_RULE_NET_PORT, &nb, 0) != 0)
      fail("cannot apply the Landlock ruleset: landlock_add_rule port %llu: %s", (unsigned long long)pl->ports[i].port, strerror(errno));
  }
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) fail("cannot apply the Landlock ruleset: PR_SET_NO_NEW_PRIVS: %s", strerror(errno));
  if (syscall(SYS_landlock_restrict_self, rs, 0) != 0) fail("cannot apply the Landlock ruleset: landlock_restrict_self: %s", strerror(errno));
  close(rs);
}

/* The highest capability number this kernel knows (40 when it cannot be read). */
static int cap_last_cap(void) {
  int last = 40;
  int fd = open("/proc/sys/kernel/cap_last_cap", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return last;
  char b[16];
  ssize_t n = read(fd, b, sizeof b - 1);
  close(fd);
  if (n > 0) {
    b[n] = 0;
    char *end;
    long v = strtol(b, &end, 10);
    if (end != b && v >= 0 && v < 64) last = (int)v;
  }
  return last;
}

/* Step 3: no capability survives into the sandbox (in-process.ts: issue 22, item 1). */
static void drop_capabilities(int last) {
  for (int cap = 0; cap <= last; cap++)
    if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0) break; /* EPERM: not root, nothing in reach to drop */
  prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); /* a kernel without ambient capabilities has none */
  uint32_t header[2] = {0x20080522, 0}; /* _LINUX_CAPABILITY_VERSION_3, this process */
  uint32_t data[6] = {0};
  if (syscall(SYS_capset, header, data) != 0) fail("cannot drop capabilities: capset: %s", strerror(errno));
}

/* Step 4: no_new_privs and the seccomp filter. */
static void apply_seccomp(const struct plan *pl) {
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) fail("cannot set PR_SET_NO_NEW_PRIVS: %s", strerror(errno));
  if (!(pl->flags & F_SECCOMP)) return;
  struct sock_fprog_ prog = {(unsigned short)(pl->bpf_len / 8), pl->bpf};
  if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0)
    fail("cannot install the seccomp filter: %s (the kernel needs CONFIG_SECCOMP_FILTER)", strerror(errno));
}

/* Step 5: default dispositions (but for SIGKILL, SIGSTOP and libc's reserved signals) and an empty mask. */
static void reset_signals(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = SIG_DFL;
  sigemptyset(&sa.sa_mask);
  for (int sig = 1; sig < _NSIG; sig++) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    sigaction(sig, &sa, NULL); /* EINVAL for reserved signals: nothing to reset */
  }
  sigset_t none;
  sigemptyset(&none);
  if (sigprocmask(SIG_SETMASK, &none, NULL) != 0) fail("sigprocmask: %s", strerror(errno));
}

/* Whether `path` is a regular file with an execute bit (symlinks followed), as find-executable.ts judges. */
static int executable_file(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111) != 0;
}

/* Step 6: `name` resolved like the helper (src/find-executable.ts: names with '/' as given, else the first
   executable regular file on PATH, an empty entry meaning the current folder), or NULL. Returns a malloc'd path. */
static char *resolve(const char *name) {
  if (strchr(name, '/') != NULL) return strdup(name);
  const char *path = getenv("PATH");
  if (path == NULL) path = "/usr/local/bin:/usr/bin:/bin";
  size_t nl = strlen(name);
  for (const char *p = path;;) {
    const char *end = strchr(p, ':');
    size_t dl = end != NULL ? (size_t)(end - p) : strlen(p);
    char *full = malloc(dl + 1 + nl + 1);
    if (full == NULL) return NULL;
    if (dl == 0)
      memcpy(full, name, nl + 1);
    else {
      memcpy(full, p, dl);
      full[dl] = '/';
      memcpy(full + dl + 1, name, nl + 1);
    }
    if (executable_file(full)) return full;
    free(full);
    if (end == NULL) return NULL;
    p = end + 1;
  }
}

int main(int argc, char **argv) {
  if (argc < 5 || strcmp(argv[1], "--plan-fd") != 0 || strcmp(argv[3], "--") != 0)
    fail("usage: sandbox-exec --plan-fd N -- COMMAND [ARG...]");
  char *end;
  errno = 0;
  long pfd = strtol(argv[2], &end, 10);
  if (errno != 0 || *end != 0 || end == argv[2] || pfd < 0 || pfd > 65535) fail("--plan-fd must be an fd number (got %s)", argv[2]);
  char **command = argv + 4;

  size_t len;
  unsigned char *buf = read_plan((int)pfd, &len);
  struct plan pl;
  memset(&pl, 0, sizeof pl);
  parse_plan(buf, len, &pl);
  free(buf);

  cloexec_inherited();
  int last = cap_last_cap();
  if (pl.flags & F_LANDLOCK) apply_landlock(&pl);
  if (pl.flags & F_DROP_CAPS) drop_capabilities(last);
  apply_seccomp(&pl);

  char *file = resolve(command[0]);
  if (file == NULL) {
    fprintf(stderr, "%s: command not found\n", command[0]);
    return 127;
  }
  if (pl.flags & F_RESET_SIGNALS) reset_signals();
  if ((pl.flags & F_SETSID) && setsid() < 0) fail("setsid: %s", strerror(errno));
  execve(file, command, environ);
  int e = errno;
  fprintf(stderr, "%s: %s\n", command[0], strerror(e));
  return e == ENOENT ? 127 : 126;
}
