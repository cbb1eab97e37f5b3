/*
 * shellmcp room launcher: the one process that stays inside an escalation room for the rest of a `shell` call
 * and starts each escalated program of that call in it (src/sandbox/linux/room-launcher.ts describes the room's
 * life; this file only speaks the wire below). Built statically against musl by scripts/build-shells-static.sh
 * and carried inside the executable, so starting a program in an existing room costs a fork and an exec instead
 * of a new bubblewrap (or a new sandbox helper) each time.
 *
 * Usage: room-launcher [--contained]   with fd 3 a SOCK_STREAM Unix socket to the escalation worker.
 *        room-launcher --guard FD [--exec-fd N] [--join-cgroup PROCS] [--status-fd N] [--ctty N] -- PATH ARGV0 [ARG...]
 *                                                                                   (the lifeline guard)
 *        room-launcher --join-ns USERFD NETFD -- PATH ARGV0 [ARG...]   (into the server's loopback network)
 *   --contained: the room is a pid namespace of its own (bubblewrap): once no program of the room runs, every
 *   other process in it is killed (kill(-1, SIGKILL)), as when each program had a room of its own.
 *
 * Worker -> launcher, frames on fd 3: u32 length (little endian, of what follows), then
 *   'S' spawn: u32 id, u32 nfds, nfds x i32 destination fd numbers, then NUL-terminated strings: path, cwd,
 *              u32 argc, argc strings, u32 envc, envc strings (the counts are u32 between the strings).
 *              The frame's nfds fds travel as SCM_RIGHTS with its first byte (a stream socket never delivers
 *              them after the bytes they came with), and are taken in order from the fds received so far.
 *   'K' kill:  u32 id, i32 signal: the program's process group (it is a session leader) gets the signal.
 * Launcher -> worker, 12-byte records: u32 kind (1 spawned: value = pid inside the room, or -errno when fork
 *   failed; 2 exited: value = the wait status), u32 id, i32 value.
 *
 * Each program: fork; in the child a new session (no controlling terminal), default signal dispositions and an
 * empty signal mask, the received fds on their destination numbers, /dev/null for any of 0-2 not given, every
 * other fd closed, chdir, execve(path, argv, env) with argv[0] exactly as given. A failed chdir or exec prints
 * one line on the program's stderr and exits 126 (not executable) or 127 (anything else), as a shell does.
 * EOF on fd 3 (the worker closed the room, or died): every process of the room gets SIGKILL, the launcher exits.
 * A malformed frame (a count, string or fd number out of bounds, bytes left after its last field, a stream that ends
 * inside a frame): the launcher says why on its stderr and exits 2 (fail closed; the room ends, the program is not run).
 * A program is not run either (one line on its stderr, exit 126) when its Landlock domain cannot be nested
 * (nest_landlock) or its fds cannot be placed (a descriptor limit too low even once raised to the hard limit).
 *
 * --guard (src/sandbox/linux/lifeline.ts): the one process between the server and anything it starts (a call's shell or
 * its sandbox, an escalated program, a room), so that nothing outlives the server whatever kills it. FD is the read
 * end of a pipe whose only write end the server holds: when the server dies (any signal, the OOM killer) the pipe
 * reports EOF. The guard is the subreaper of everything below it, runs PATH with argv ARGV0 ARG... as its one child
 * (every fd but FD passed on, signals reset, same session and process group), and
 * - on EOF on FD: kills every process below it (the child, its process group, and every orphan re-parented to the
 *   guard), reaps them, and exits 137;
 * - when the child ends: kills what it left behind (nothing of a program outlives it, as in a room), and ends the
 *   way the child did (the same exit status, or the same signal);
 * - on SIGUSR1 from its parent (the server ending a call: timeout, cancel): kills every process below it, reaps
 *   them, and dies of SIGKILL (what the server's SIGKILL of the process group used to look like);
 * - ignores the other signals a call's or a room's kill sends it besides SIGKILL (SIGTERM, SIGINT, SIGHUP, ...: they
 *   reach the child through its process group), and passes SIGCONT on to the child.
 * --exec-fd N: the program is the file open at fd N (exec'd with execveat, the fd closed on exec), PATH only names it
 * in messages: the server's own executable, which the guard could not reach by a path (`/proc/self/exe` would be the
 * guard, `/proc/<server>/exe` is closed to a non-root child of a non-dumpable server).
 * --status-fd N (the exec-server's processes, whose leftovers Codex lets run on until terminate or shutdown): when the
 *   child ends, the guard writes its wait status (4 bytes, native order) to fd N and closes it instead of killing
 *   what the child left behind; it stays the subreaper of those leftovers (the server's lifeline and SIGUSR1 still end
 *   them) and ends, the way the child did, once the last of them has ended. Its own fds 0-2 are /dev/null once the
 *   child is started: the child's pipes or terminal end when the child and its leftovers have closed them.
 * --ctty N (the exec-server's terminal processes): the terminal open at fd N (the guard leads a new session, as the
 *   server starts it) becomes the guard's controlling terminal before the child starts, its foreground process group
 *   the guard's and the child's; when it cannot, nothing runs (exit 127).
 * --join-cgroup PROCS (a call's cgroup, its `cgroup.procs` file): the child is made inside that cgroup
 *   (clone3 with CLONE_INTO_CGROUP on the cgroup's folder, Linux 5.7+), so everything below the guard is in it before
 *   anything runs; the guard itself stays where it is. Moving a running process into a cgroup instead (a write to
 *   `cgroup.procs`) waits for an RCU grace period, 5-9 ms per call when calls are spaced out. Where clone3 cannot do
 *   it (an older kernel, a folder it cannot open), the guard writes its own pid into PROCS first and forks; when that
 *   write fails too nothing runs (exit 126).
 * It cannot start the child: one line on stderr, exit 127 (nothing ran).
 *
 * --join-ns (src/sandbox/linux/loopback-net.ts): joins the user namespace open at USERFD, then the network namespace
 * open at NETFD (the server's private loopback-only network, which the user namespace owns), closes both fds and
 * execs PATH with argv ARGV0 ARG... in place (bubblewrap, which then builds the call's sandbox inside that network
 * instead of a fresh one). setns into a user namespace needs a single-threaded process, which the server is not: this
 * is that process. Nothing of the namespaces' fds reaches PATH. A namespace it cannot join, or a fd that is no
 * namespace of that kind: one line on stderr, exit 126 (nothing ran: never a sandbox in the wrong network).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;
#include <sys/syscall.h>

/* Landlock's ABI (linux/landlock.h; musl-gcc has no kernel headers): the constants and the rule this file uses. */
#define LANDLOCK_CREATE_RULESET_VERSION (1U << 0)
#define LANDLOCK_ACCESS_FS_EXECUTE (1ULL << 0)
#define LANDLOCK_ACCESS_FS_REFER (1ULL << 13)
#define LANDLOCK_RULE_PATH_BENEATH 1
struct landlock_path_beneath_attr {
  uint64_t allowed_access;
  int32_t parent_fd;
} __attribute__((packed));
#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif

/* clone3's argument (linux/sched.h, version 2 with `cgroup`) and the flag: musl-gcc has no kernel headers. */
struct clone_args_v2 {
  uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, set_tid, set_tid_size, cgroup;
};
#define CLONE_INTO_CGROUP_FLAG 0x200000000ULL
/* clone3 has number 435 on every architecture (the unified syscall table). */
#define SYS_clone3_nr 435

/* close_range has number 436 on every architecture (the unified syscall table). */
#define SYS_close_range_nr 436

#define SOCK_FD 3
#define MAX_FRAME (16u * 1024 * 1024)
#define MAX_FDS 64
#define MAX_QUEUED_FDS 1024
#define MAX_PROGRAMS 4096

static int contained;

struct program {
  pid_t pid;
  uint32_t id;
};
static struct program programs[MAX_PROGRAMS];
static int nprograms;

static int fdq[MAX_QUEUED_FDS];
static int nfdq;

static void kill_leftovers(void);

/* End everything this launcher started, then exit `code`: as the subreaper, every process of the room ends up a
   child of this one once its parent is gone, so kill and reap until no child is left. */
static void end_all(void) {
  for (int i = 0; i < nprograms; i++) kill(-programs[i].pid, SIGKILL);
  nprograms = 0;
  for (;;) {
    kill_leftovers();
    if (waitpid(-1, NULL, 0) < 0 && errno == ECHILD) break;
  }
}

static void end_room(int code) {
  end_all();
  _exit(code);
}

static void die(const char *what) {
  fprintf(stderr, "room-launcher: %s\n", what);
  end_room(2);
}

static void send_record(uint32_t kind, uint32_t id, int32_t value) {
  unsigned char rec[12];
  memcpy(rec, &kind, 4);
  memcpy(rec + 4, &id, 4);
  memcpy(rec + 8, &value, 4);
  size_t off = 0;
  while (off < sizeof rec) {
    ssize_t n = send(SOCK_FD, rec + off, sizeof rec - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) end_room(0); /* the worker is gone: the room ends */
    off += (size_t)n;
  }
}

/* Kill every child of this process that is not a running program (orphans re-parented here: we are a subreaper);
   in a room that is a pid namespace of its own, every process but its init and this one. */
static void kill_leftovers(void) {
  if (contained) kill(-1, SIGKILL);
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)getpid(), (int)getpid());
  FILE *f = fopen(path, "re");
  if (f == NULL) return;
  long pid;
  while (fscanf(f, "%ld", &pid) == 1) {
    int known = 0;
    for (int i = 0; i < nprograms; i++)
      if (programs[i].pid == (pid_t)pid) known = 1;
    if (!known) kill((pid_t)pid, SIGKILL);
  }
  fclose(f);
}

struct reader {
  const unsigned char *p, *end;
  int bad;
};

static uint32_t rd_u32(struct reader *r) {
  uint32_t v = 0;
  if (r->end - r->p < 4) {
    r->bad = 1;
    return 0;
  }
  memcpy(&v, r->p, 4);
  r->p += 4;
  return v;
}

static char *rd_str(struct reader *r) {
  const unsigned char *nul = memchr(r->p, 0, (size_t)(r->end - r->p));
  if (nul == NULL) {
    r->bad = 1;
    return NULL;
  }
  char *s = (char *)r->p;
  r->p = nul + 1;
  return s;
}

static char **rd_strings(struct reader *r) {
  uint32_t n = rd_u32(r);
  if (r->bad || n > (uint32_t)(r->end - r->p)) {
    r->bad = 1;
    return NULL;
  }
  char **v = calloc((size_t)n + 1, sizeof(char *));
  if (v == NULL) die("out of memory");
  for (uint32_t i = 0; i < n; i++) {
    v[i] = rd_str(r);
    if (r->bad) {
      free(v);
      return NULL;
    }
  }
  return v;
}

/* close_range(2) (Linux 5.9), or a loop over the fd numbers below the soft limit where it is missing. */
static void close_from_to(unsigned lo, unsigned hi) {
  if (syscall(SYS_close_range_nr, lo, hi, 0) == 0) return;
  long max = sysconf(_SC_OPEN_MAX);
  if (max < 0 || max > 65536) max = 65536;
  for (unsigned fd = lo; fd <= hi && fd < (unsigned)max; fd++) close((int)fd);
}

/*
 * Put the program in a Landlock domain nested in the launcher's. A process may never ptrace (so neither read memory
 * nor take fds with pidfd_getfd from) a process of a less nested domain, whatever its capabilities, and with ABI 6's
 * signal scope it may not signal it either: a program of the room cannot reach the launcher's socket, forge its
 * records, or kill or stop it. The ruleset restricts nothing else: it handles execution and "refer" (moving a file
 * to another folder) and allows both beneath `/`. A domain that does not handle "refer" refuses every such move with
 * EXDEV (git's object store, any `mv` between folders): ABI 1 has no "refer", so no nesting there, and none where
 * the kernel has no Landlock. Where Landlock (ABI 2+) is there, every step must succeed: a refusal of any of them
 * (a seccomp filter, an exhausted limit of nested domains) stops the program before it runs — one line on its
 * stderr, exit 126 — rather than running it un-nested.
 */
static void nest_landlock(const char *name) {
  int abi = (int)syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
  if (abi < 2) return;
  const uint64_t access = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_REFER;
  struct {
    uint64_t handled_access_fs, handled_access_net, scoped;
  } attr = {access, 0, abi >= 6 ? 2 /* LANDLOCK_SCOPE_SIGNAL */ : 0};
  size_t size = abi >= 6 ? sizeof attr : abi >= 4 ? 2 * sizeof(uint64_t) : sizeof(uint64_t);
  const char *step = "landlock_create_ruleset";
  int rs = (int)syscall(SYS_landlock_create_ruleset, &attr, size, 0);
  int root = -1, ok = 0;
  if (rs >= 0) {
    step = "open /";
    root = open("/", O_PATH | O_CLOEXEC);
  }
  struct landlock_path_beneath_attr beneath = {.allowed_access = access, .parent_fd = root};
  if (root >= 0) {
    step = "landlock_add_rule";
    if (syscall(SYS_landlock_add_rule, rs, LANDLOCK_RULE_PATH_BENEATH, &beneath, 0) == 0) {
      step = "PR_SET_NO_NEW_PRIVS";
      if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0) {
        step = "landlock_restrict_self";
        ok = syscall(SYS_landlock_restrict_self, rs, 0) == 0;
      }
    }
  }
  int err = errno;
  if (root >= 0) close(root);
  if (rs >= 0) close(rs);
  if (ok) return;
  dprintf(2, "shellmcp: %s: not run: cannot nest its Landlock domain (%s: %s)\n", name, step, strerror(err));
  _exit(126);
}

/* Close every fd from 3 up that is not one of the `n` fds in `keep`. */
static void close_all_but(const int *keep, int n) {
  int sorted[MAX_FDS];
  int ns = 0;
  for (int i = 0; i < n; i++) {
    int d = keep[i], j = ns;
    while (j > 0 && sorted[j - 1] > d) {
      sorted[j] = sorted[j - 1];
      j--;
    }
    sorted[j] = d;
    ns++;
  }
  unsigned lo = 3;
  for (int i = 0; i < ns; i++) {
    if ((unsigned)sorted[i] < lo) continue;
    if ((unsigned)sorted[i] > lo) close_from_to(lo, (unsigned)sorted[i] - 1);
    lo = (unsigned)sorted[i] + 1;
  }
  close_from_to(lo, ~0u);
}

static void child(int nfds, const int *fds, const int32_t *dests, const char *path, const char *cwd, char **argv,
                  char **envp) {
  sigset_t none;
  sigemptyset(&none);
  for (int s = 1; s < 65; s++) signal(s, SIG_DFL);
  sigprocmask(SIG_SETMASK, &none, NULL);
  setsid();
  int top = 3;
  for (int i = 0; i < nfds; i++)
    if (dests[i] + 1 > top) top = dests[i] + 1;
  if (top < SOCK_FD + 1) top = SOCK_FD + 1;
  /* Only the received fds stay open (the launcher's socket, signalfd and the fds queued for other programs go). */
  close_all_but(fds, nfds);
  /* Sources above every destination first, so no dup2 overwrites a source still to be placed: fd numbers below
     top + 2 * nfds (the received fds themselves may hold nfds numbers from top up), which may pass a soft
     RLIMIT_NOFILE of 1024 (destinations go up to 1023). The soft limit is raised to what they need for the move (at
     most the hard limit) and set back after it (the placed fds stay). */
  int need = top + 2 * nfds;
  struct rlimit lim, was;
  int raised = 0;
  if (getrlimit(RLIMIT_NOFILE, &was) == 0 && was.rlim_cur != RLIM_INFINITY && was.rlim_cur < (rlim_t)need) {
    lim = was;
    lim.rlim_cur = (rlim_t)need;
    if (was.rlim_max != RLIM_INFINITY && was.rlim_max < lim.rlim_cur) lim.rlim_cur = was.rlim_max;
    if (lim.rlim_cur < (rlim_t)need || setrlimit(RLIMIT_NOFILE, &lim) != 0) {
      int to = 2; /* before the fds are placed: the program's stderr is the received fd bound for 2, if any */
      for (int i = 0; i < nfds; i++)
        if (dests[i] == 2) to = fds[i];
      dprintf(to, "shellmcp: %s: not run: its fd %d needs a descriptor limit of %d (RLIMIT_NOFILE: soft %llu, hard %llu)\n",
              argv[0] != NULL ? argv[0] : path, top - 1, need, (unsigned long long)was.rlim_cur,
              (unsigned long long)was.rlim_max);
      _exit(126);
    }
    raised = 1;
  }
  int src[MAX_FDS];
  for (int i = 0; i < nfds; i++) {
    src[i] = fcntl(fds[i], F_DUPFD, top);
    if (src[i] < 0) {
      dprintf(2, "shellmcp: %s: not run: cannot place its fds: %s\n", argv[0] != NULL ? argv[0] : path, strerror(errno));
      _exit(126);
    }
  }
  int given[3] = {0, 0, 0};
  for (int i = 0; i < nfds; i++) {
    if (dup2(src[i], dests[i]) < 0) _exit(127);
    if (dests[i] <= 2) given[dests[i]] = 1;
  }
  for (int d = 0; d <= 2; d++) {
    if (given[d]) continue;
    int n = open("/dev/null", d == 0 ? O_RDONLY : O_WRONLY);
    if (n < 0 || (n != d && dup2(n, d) < 0)) _exit(127);
    if (n != d) close(n);
  }
  /* Close everything else: every fd from 3 up that is not a destination (the worker's socket, the sources). */
  close_all_but(dests, nfds);
  if (raised) setrlimit(RLIMIT_NOFILE, &was);
  nest_landlock(argv[0] != NULL ? argv[0] : path);
  if (chdir(cwd) != 0) {
    dprintf(2, "shellmcp: %s: cannot enter %s: %s\n", argv[0] != NULL ? argv[0] : path, cwd, strerror(errno));
    _exit(127);
  }
  execve(path, argv, envp);
  int err = errno;
  dprintf(2, "shellmcp: %s: %s\n", path, strerror(err));
  _exit(err == EACCES || err == ENOEXEC || err == EISDIR ? 126 : 127);
}

static void on_spawn(struct reader *r) {
  uint32_t id = rd_u32(r);
  uint32_t nfds = rd_u32(r);
  if (r->bad || nfds > MAX_FDS || (uint32_t)nfds > (uint32_t)nfdq) die("bad spawn frame (fds)");
  int32_t dests[MAX_FDS];
  for (uint32_t i = 0; i < nfds; i++) {
    dests[i] = (int32_t)rd_u32(r);
    if (dests[i] < 0 || dests[i] > 1023) die("bad spawn frame (destination fd)");
  }
  char *path = rd_str(r);
  char *cwd = rd_str(r);
  char **argv = rd_strings(r);
  char **envp = r->bad ? NULL : rd_strings(r);
  if (r->bad || argv == NULL || envp == NULL || argv[0] == NULL) die("bad spawn frame");
  if (r->p != r->end) die("bad spawn frame (bytes after its last string)");
  int fds[MAX_FDS];
  memcpy(fds, fdq, nfds * sizeof(int));
  memmove(fdq, fdq + nfds, (size_t)(nfdq - (int)nfds) * sizeof(int));
  nfdq -= (int)nfds;
  /* Every signal blocked across fork: one sent to the new program before it has set its dispositions back to the
     defaults (a kill frame that arrives that early) stays pending until child() has, instead of running one of the
     launcher's handlers in it (a sanitizer's, under the sanitized build). child() unblocks them. */
  sigset_t all, was;
  sigfillset(&all);
  sigprocmask(SIG_BLOCK, &all, &was);
  pid_t pid = nprograms >= MAX_PROGRAMS ? (errno = EAGAIN, -1) : fork();
  if (pid == 0) child((int)nfds, fds, dests, path, cwd, argv, envp);
  int err = errno;
  sigprocmask(SIG_SETMASK, &was, NULL);
  for (uint32_t i = 0; i < nfds; i++) close(fds[i]);
  free(argv);
  free(envp);
  if (pid < 0) {
    send_record(1, id, -err);
    send_record(2, id, 127 << 8);
    return;
  }
  programs[nprograms].pid = pid;
  programs[nprograms].id = id;
  nprograms++;
  send_record(1, id, (int32_t)pid);
}

static void on_kill(struct reader *r) {
  uint32_t id = rd_u32(r);
  int32_t sig = (int32_t)rd_u32(r);
  if (r->bad || sig < 0 || sig > 64 || r->p != r->end) die("bad kill frame");
  for (int i = 0; i < nprograms; i++)
    if (programs[i].id == id) {
      kill(-programs[i].pid, sig);
      kill(programs[i].pid, sig);
    }
}

static void reap(void) {
  int status;
  pid_t pid;
  while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
    for (int i = 0; i < nprograms; i++) {
      if (programs[i].pid != pid) continue;
      uint32_t id = programs[i].id;
      programs[i] = programs[--nprograms];
      send_record(2, id, (int32_t)status);
      break;
    }
  }
  if (nprograms == 0) kill_leftovers();
}

/* End the way a child did: its exit status, or its signal (no core file: the child already wrote one if any). */
static void mirror_status(int status) {
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    struct rlimit none = {0, 0};
    setrlimit(RLIMIT_CORE, &none);
    signal(sig, SIG_DFL);
    sigset_t only;
    sigemptyset(&only);
    sigaddset(&only, sig);
    sigprocmask(SIG_UNBLOCK, &only, NULL);
    kill(getpid(), sig);
    _exit(128 + sig);
  }
  _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 1);
}

/* Signals the guard takes through its signalfd instead of their default action. */
static const int GUARD_SIGNALS[] = {SIGCHLD, SIGCONT, SIGTERM, SIGINT,  SIGHUP,  SIGQUIT, SIGUSR1,
                                    SIGUSR2, SIGALRM, SIGTSTP, SIGTTIN, SIGTTOU, SIGPIPE, SIGWINCH};

/* Write this process's pid into `procs` (a cgroup's `cgroup.procs`): 0, or -1 with one line on stderr. */
static int join_cgroup(const char *procs) {
  int fd = open(procs, O_WRONLY | O_CLOEXEC);
  char pid[24];
  int n = snprintf(pid, sizeof pid, "%d", (int)getpid());
  if (fd < 0 || write(fd, pid, (size_t)n) != n) {
    fprintf(stderr, "shellmcp: cannot join the call's cgroup (%s): %s\n", procs, strerror(errno));
    if (fd >= 0) close(fd);
    return -1;
  }
  close(fd);
  return 0;
}

/* The folder of the cgroup whose `cgroup.procs` is `procs`, open O_DIRECTORY (for CLONE_INTO_CGROUP), or -1. */
static int open_cgroup_dir(const char *procs) {
  static const char suffix[] = "/cgroup.procs";
  size_t n = strlen(procs), s = sizeof suffix - 1;
  char dir[4096];
  if (n <= s || n - s >= sizeof dir || strcmp(procs + n - s, suffix) != 0) return -1;
  memcpy(dir, procs, n - s);
  dir[n - s] = '\0';
  return open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

/* fork() whose child starts inside the cgroup open at `cgfd` (clone3 CLONE_INTO_CGROUP): the child's pid, 0 in the
   child, or -1 with errno (the kernel cannot: the caller joins the cgroup and forks instead). */
static pid_t fork_into_cgroup(int cgfd) {
  struct clone_args_v2 a;
  memset(&a, 0, sizeof a);
  a.flags = CLONE_INTO_CGROUP_FLAG;
  a.exit_signal = SIGCHLD;
  a.cgroup = (uint64_t)cgfd;
  return (pid_t)syscall(SYS_clone3_nr, &a, sizeof a);
}

static int guard_main(int lifeline, int exec_fd, int status_fd, int ctty, const char *procs, const char *path,
                      char **child_argv) {
  /* The call's cgroup: the child is made in it (fork_into_cgroup); where its folder cannot be opened, the guard
     joins it first, as on kernels without CLONE_INTO_CGROUP. */
  int cgfd = procs == NULL ? -1 : open_cgroup_dir(procs);
  if (procs != NULL && cgfd < 0 && join_cgroup(procs) != 0) return 126;
  int fl = fcntl(lifeline, F_GETFD);
  if (fl < 0 || fcntl(lifeline, F_SETFD, fl | FD_CLOEXEC) != 0) {
    fprintf(stderr, "room-launcher --guard: fd %d is not open\n", lifeline);
    return 127;
  }
  if (exec_fd >= 0 && fcntl(exec_fd, F_SETFD, FD_CLOEXEC) != 0) {
    fprintf(stderr, "room-launcher --guard: fd %d is not open\n", exec_fd);
    return 127;
  }
  if (status_fd >= 0 && (status_fd == lifeline || status_fd == exec_fd || fcntl(status_fd, F_SETFD, FD_CLOEXEC) != 0)) {
    fprintf(stderr, "room-launcher --guard: fd %d is not open (or not a status fd of its own)\n", status_fd);
    return 127;
  }
  if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
    fprintf(stderr, "room-launcher --guard: cannot become a subreaper: %s\n", strerror(errno));
    return 127;
  }
  if (ctty >= 0 && ioctl(ctty, TIOCSCTTY, 0) != 0) {
    fprintf(stderr, "room-launcher --guard: cannot make fd %d its controlling terminal: %s\n", ctty, strerror(errno));
    return 127;
  }
  prctl(PR_SET_DUMPABLE, 0);
  prctl(PR_SET_NAME, "shellmcp-guard"); /* its name in ps and /proc/<pid>/comm, whatever file it was run from */
  sigset_t set, old;
  sigemptyset(&set);
  for (size_t i = 0; i < sizeof GUARD_SIGNALS / sizeof GUARD_SIGNALS[0]; i++) sigaddset(&set, GUARD_SIGNALS[i]);
  sigprocmask(SIG_BLOCK, &set, &old);
  int sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sfd < 0) {
    fprintf(stderr, "room-launcher --guard: signalfd: %s\n", strerror(errno));
    return 127;
  }
  pid_t pid = cgfd >= 0 ? fork_into_cgroup(cgfd) : fork();
  if (pid < 0 && cgfd >= 0) {
    /* No CLONE_INTO_CGROUP here (ENOSYS, E2BIG: Linux < 5.7; EINVAL, EOPNOTSUPP, EBUSY: a cgroup it cannot start a
       process in directly): the guard joins the cgroup and forks, so the child is in it all the same. */
    close(cgfd);
    cgfd = -1;
    if (join_cgroup(procs) != 0) return 126;
    pid = fork();
  }
  if (cgfd >= 0) close(cgfd);
  if (pid < 0) {
    fprintf(stderr, "room-launcher --guard: fork: %s\n", strerror(errno));
    return 127;
  }
  if (pid == 0) {
    sigset_t none;
    sigemptyset(&none);
    for (int s = 1; s < 65; s++) signal(s, SIG_DFL);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if (exec_fd >= 0)
      syscall(SYS_execveat, exec_fd, "", child_argv, environ, AT_EMPTY_PATH);
    else
      execv(path, child_argv);
    int err = errno;
    dprintf(2, "shellmcp: %s: %s\n", path, strerror(err));
    _exit(err == EACCES || err == ENOEXEC || err == EISDIR ? 126 : 127);
  }
  if (status_fd >= 0) {
    /* With --status-fd the guard can outlive its child by far (the leftovers run on below it): it keeps no copy of
       the child's stdin, stdout and stderr (pipes, or a terminal whose session it leads), so that they reach EOF
       once the child and what it left holding them have closed them, as without a guard. */
    int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (nul >= 0) {
      for (int d = 0; d < 3; d++)
        if (d != lifeline && d != sfd && d != status_fd && d != exec_fd) dup2(nul, d);
      if (nul > 2) close(nul);
    }
  }
  int child_done = 0, child_status = 0;
  /* The programs table holds the child, so kill_leftovers spares it while it runs. */
  programs[0].pid = pid;
  programs[0].id = 0;
  nprograms = 1;
  for (;;) {
    struct pollfd pf[2] = {{lifeline, POLLIN, 0}, {sfd, POLLIN, 0}};
    if (poll(pf, 2, -1) < 0) {
      if (errno == EINTR) continue;
      end_room(137);
    }
    if (pf[0].revents != 0) {
      char b[64];
      ssize_t n = read(lifeline, b, sizeof b);
      if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) end_room(137); /* the server is gone */
    }
    if (pf[1].revents == 0) continue;
    struct signalfd_siginfo si;
    while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
      if (si.ssi_signo == SIGCONT && nprograms > 0) kill(pid, SIGCONT);
      if (si.ssi_signo == SIGUSR1 && (pid_t)si.ssi_pid == getppid()) {
        /* The server ends the call (timeout, cancel): everything below ends, then the guard, as if SIGKILLed. */
        end_all();
        signal(SIGKILL, SIG_DFL);
        kill(getpid(), SIGKILL);
      }
    }
    int status;
    pid_t r;
    while ((r = waitpid(-1, &status, WNOHANG)) > 0) {
      if (r != pid) continue;
      nprograms = 0;
      if (status_fd >= 0) {
        /* The child ended: say how, and let what it left behind run on below this guard. */
        int32_t st = (int32_t)status;
        ssize_t w;
        do w = write(status_fd, &st, sizeof st);
        while (w < 0 && errno == EINTR);
        close(status_fd);
        status_fd = -1;
        child_status = status;
        child_done = 1;
        continue;
      }
      /* The child ended: what it left behind ends too, then the guard ends as it did. */
      for (;;) {
        kill_leftovers();
        if (waitpid(-1, NULL, 0) < 0 && errno == ECHILD) break;
      }
      mirror_status(status);
    }
    /* With --status-fd: the last leftover has ended. */
    if (child_done && r < 0 && errno == ECHILD) mirror_status(child_status);
  }
}

/* A decimal fd number from 0 to 1023, or -1. */
static long fd_arg(const char *s) {
  char *end = NULL;
  long v = strtol(s, &end, 10);
  return end != s && *end == 0 && v >= 0 && v <= 1023 ? v : -1;
}

/* --join-ns: the user namespace first (it owns the network namespace, and joining it gives this process the right
   to join that one), then the network namespace; then PATH in place. */
static int join_main(int userfd, int netfd, const char *path, char **child_argv) {
  if (setns(userfd, CLONE_NEWUSER) != 0) {
    fprintf(stderr, "shellmcp: cannot join this server's loopback network (its user namespace, fd %d): %s\n", userfd,
            strerror(errno));
    return 126;
  }
  if (setns(netfd, CLONE_NEWNET) != 0) {
    fprintf(stderr, "shellmcp: cannot join this server's loopback network (fd %d): %s\n", netfd, strerror(errno));
    return 126;
  }
  close(userfd);
  close(netfd);
  execv(path, child_argv);
  int err = errno;
  dprintf(2, "shellmcp: %s: %s\n", path, strerror(err));
  return err == EACCES || err == ENOEXEC || err == EISDIR ? 126 : 127;
}

int main(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], "--guard") == 0) {
    long fd = argc >= 3 ? fd_arg(argv[2]) : -1, exec_fd = -1, status_fd = -1, ctty = -1;
    const char *procs = NULL;
    int i = 3, bad = fd < 0;
    for (; !bad && i + 1 < argc && strcmp(argv[i], "--") != 0; i += 2) {
      if (strcmp(argv[i], "--exec-fd") == 0)
        bad = (exec_fd = fd_arg(argv[i + 1])) < 0;
      else if (strcmp(argv[i], "--join-cgroup") == 0)
        procs = argv[i + 1];
      else if (strcmp(argv[i], "--status-fd") == 0)
        bad = (status_fd = fd_arg(argv[i + 1])) < 0;
      else if (strcmp(argv[i], "--ctty") == 0)
        bad = (ctty = fd_arg(argv[i + 1])) < 0;
      else
        bad = 1;
    }
    if (bad || argc < i + 3 || strcmp(argv[i], "--") != 0) {
      fprintf(stderr,
              "usage: room-launcher --guard FD [--exec-fd N] [--join-cgroup PROCS] [--status-fd N] [--ctty N] -- PATH ARGV0 "
              "[ARG...]\n");
      return 2;
    }
    return guard_main((int)fd, (int)exec_fd, (int)status_fd, (int)ctty, procs, argv[i + 1], argv + i + 2);
  }
  if (argc >= 2 && strcmp(argv[1], "--join-ns") == 0) {
    long userfd = argc >= 3 ? fd_arg(argv[2]) : -1, netfd = argc >= 4 ? fd_arg(argv[3]) : -1;
    if (userfd < 0 || netfd < 0 || userfd == netfd || argc < 7 || strcmp(argv[4], "--") != 0) {
      fprintf(stderr, "usage: room-launcher --join-ns USERFD NETFD -- PATH ARGV0 [ARG...]\n");
      return 2;
    }
    return join_main((int)userfd, (int)netfd, argv[5], argv + 6);
  }
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--contained") == 0)
      contained = 1;
    else {
      fprintf(stderr, "usage: room-launcher [--contained]  (fd 3: the escalation worker's socket)\n");
      return 2;
    }
  }
  int type;
  socklen_t tl = sizeof type;
  if (getsockopt(SOCK_FD, SOL_SOCKET, SO_TYPE, &type, &tl) != 0) {
    /* A room without network runs under the call's network-off seccomp filter, which refuses getsockopt (EPERM):
       then fd 3 must at least be a socket (recvmsg on anything else fails anyway). */
    struct stat st;
    if (errno != EPERM || fstat(SOCK_FD, &st) != 0 || !S_ISSOCK(st.st_mode)) die("fd 3 is not a stream socket");
  } else if (type != SOCK_STREAM)
    die("fd 3 is not a stream socket");
  fcntl(SOCK_FD, F_SETFD, FD_CLOEXEC);
  /* Both are what keeps the room bounded: without them, no room (the worker reports it ended; fail closed). */
  if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) die("cannot become the room's subreaper");
  /* Not dumpable: a program of the room (same uid, same namespaces) may not ptrace this process, read its memory or
     take its socket with pidfd_getfd without CAP_SYS_PTRACE (which a bubblewrap room has dropped); a program's own
     exec makes it dumpable again. The nested Landlock domain of each program (nest_landlock) holds even for root. */
  if (prctl(PR_SET_DUMPABLE, 0) != 0) die("cannot make itself non-dumpable");
  signal(SIGPIPE, SIG_IGN);
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, NULL);
  int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sfd < 0) die("signalfd failed");

  size_t cap = 64 * 1024, len = 0;
  unsigned char *buf = malloc(cap);
  if (buf == NULL) die("out of memory");
  for (;;) {
    struct pollfd pf[2] = {{SOCK_FD, POLLIN, 0}, {sfd, POLLIN, 0}};
    if (poll(pf, 2, -1) < 0) {
      if (errno == EINTR) continue;
      die("poll failed");
    }
    if (pf[1].revents != 0) {
      struct signalfd_siginfo si;
      while (read(sfd, &si, sizeof si) > 0) {
      }
      reap();
    }
    if (pf[0].revents == 0) continue;
    if (cap - len < 64 * 1024) {
      if (cap >= MAX_FRAME + 8 + 64 * 1024) die("frame too large");
      cap *= 2;
      buf = realloc(buf, cap);
      if (buf == NULL) die("out of memory");
    }
    struct iovec iov = {buf + len, cap - len};
    union {
      struct cmsghdr h;
      char space[CMSG_SPACE(sizeof(int) * MAX_FDS)];
    } ctl;
    struct msghdr m = {0};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = ctl.space;
    m.msg_controllen = sizeof ctl.space;
    ssize_t n = recvmsg(SOCK_FD, &m, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      n = 0;
    }
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c != NULL; c = CMSG_NXTHDR(&m, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
      for (int i = 0; i < k; i++) {
        int fd;
        memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
        if (nfdq >= MAX_QUEUED_FDS) die("too many fds queued");
        fdq[nfdq++] = fd;
      }
    }
    if ((m.msg_flags & MSG_CTRUNC) != 0) die("fds truncated");
    if (n == 0 && len > 0) die("truncated frame at the end of the stream");
    if (n == 0) end_room(0); /* the worker closed the room: nothing of it may outlive this */
    len += (size_t)n;
    size_t off = 0;
    while (len - off >= 4) {
      uint32_t flen;
      memcpy(&flen, buf + off, 4);
      if (flen == 0 || flen > MAX_FRAME) die("bad frame length");
      if (len - off - 4 < flen) break;
      struct reader r = {buf + off + 4 + 1, buf + off + 4 + flen, 0};
      switch (buf[off + 4]) {
      case 'S':
        on_spawn(&r);
        break;
      case 'K':
        on_kill(&r);
        break;
      default:
        die("unknown frame");
      }
      off += 4 + flen;
    }
    memmove(buf, buf + off, len - off);
    len -= off;
  }
}
