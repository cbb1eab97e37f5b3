/*
 * no-userns: run a program with new user namespaces refused, as a container runtime's default seccomp profile does
 * (Docker's and containerd's RuntimeDefault without CAP_SYS_ADMIN: unshare and clone with CLONE_NEWUSER fail with
 * EPERM, clone3 with ENOSYS so that libc falls back to clone). Test scaffolding for test/deploy/pod.test.ts (issue 44).
 * Usage: no-userns [--uid N --gid N [--group G]] [--no-landlock] PROGRAM [ARG...]. Sets no_new_privs (needed to
 * load a filter unprivileged).
 * --uid/--gid (run as root): become that uid and gid with no supplementary group but G (a pod's fsGroup), with every
 *   capability dropped from the bounding set, as a pod's non-root container starts — for roots without setpriv
 *   (an image built from scratch). Link it statically to run it in such a root.
 * --no-landlock: the landlock_* system calls fail with ENOSYS as well, as under gVisor (which implements none).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define LOAD_NR BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr))
#define LOAD_ARG0_LO BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0]))

static void become(long uid, long gid, long group) {
  gid_t groups[1] = {(gid_t)group};
  for (int cap = 0; cap <= 63; cap++) prctl(PR_CAPBSET_DROP, cap, 0, 0, 0); /* EINVAL past the last one */
  if (setgroups(group >= 0 ? 1 : 0, groups) != 0 || setresgid(gid, gid, gid) != 0 || setresuid(uid, uid, uid) != 0) {
    perror("no-userns: switching user");
    exit(125);
  }
}

int main(int argc, char **argv) {
  long uid = -1, gid = -1, group = -1;
  while (argc > 2 && (strcmp(argv[1], "--uid") == 0 || strcmp(argv[1], "--gid") == 0 || strcmp(argv[1], "--group") == 0)) {
    long v = strtol(argv[2], NULL, 10);
    if (argv[1][2] == 'u') uid = v;
    else if (argv[1][3] == 'i') gid = v;
    else group = v;
    argv += 2;
    argc -= 2;
  }
  if (uid >= 0) become(uid, gid >= 0 ? gid : uid, group);
  int no_landlock = argc > 1 && strcmp(argv[1], "--no-landlock") == 0;
  if (no_landlock) {
    argv++;
    argc--;
  }
  if (argc < 2) {
    fprintf(stderr, "usage: no-userns [--no-landlock] PROGRAM [ARG...]\n");
    return 2;
  }
  /* landlock_create_ruleset (444), landlock_add_rule (445), landlock_restrict_self (446) on x86_64. */
  unsigned landlock_first = no_landlock ? 444 : 0xffffffff, landlock_last = no_landlock ? 446 : 0xffffffff;
  struct sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
      LOAD_NR,
      BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, landlock_first, 0, 2),
      BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, landlock_last, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone3, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_unshare, 1, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone, 0, 3),
      LOAD_ARG0_LO,
      BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, CLONE_NEWUSER, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {.len = sizeof f / sizeof f[0], .filter = f};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
    perror("no-userns: seccomp");
    return 125;
  }
  execvp(argv[1], argv + 1);
  perror("no-userns: exec");
  return 127;
}
