/* SPDX-License-Identifier: MIT */
/* A program that confines itself as daemons do, then allocates 4 blocks of 64 MiB (a sample
 * each, almost surely, at the default rate):
 *
 *   victim_confined prctl     a seccomp filter that kills the process at any attempt to
 *                             make another one (clone, clone3, fork, vfork, execve,
 *                             execveat: SECCOMP_RET_KILL_PROCESS), by prctl(PR_SET_SECCOMP)
 *                             (OpenSSH's privilege separation)
 *   victim_confined syscall   the same by the seccomp system call (libseccomp, systemd)
 *   victim_confined allowlist-prctl  a filter built as libseccomp builds them: kill by
 *                             default (SECCOMP_RET_KILL_PROCESS), allow a list (what this
 *                             program calls), by prctl(PR_SET_SECCOMP)
 *   victim_confined allowlist-syscall  the same, opens allowed, by libc's
 *                             syscall(SYS_seccomp), as libseccomp's seccomp_load installs it
 *   victim_confined prctl-killer  a filter that kills at any prctl and allows the rest, by a
 *                             raw system call no hook sees (x86-64; syscall() elsewhere)
 *   victim_confined prctl-killer-exec  the same filter, the allocations, then an exec of
 *                             itself in mode "allocate" (which the filter lets through): a
 *                             traced image started under a filter that kills on prctl
 *   victim_confined hot-syscall  hot_syscall: 100000 calls of syscall(SYS_getppid), for
 *                             callgrind (--toggle-collect=hot_syscall), confining nothing
 *   victim_confined container an allow-all filter by the seccomp system call, then an exec
 *                             of itself in mode "allocate": a program started under the
 *                             filters of a container or a service manager (Docker, systemd),
 *                             which let it make processes
 *   victim_confined allocate  nothing but the allocations
 *   victim_confined chroot DIR  chroot(DIR) (as root), where nothing else is; prints
 *                             "unreachable preload NAME" for each LD_PRELOAD entry that is
 *                             not there (an exec would have the loader complain of it)
 *   victim_confined chroot-exec DIR  copies its environment, chroot(DIR) (as root), then
 *                             execs DIR's /victim_static (statically linked) with the
 *                             copy, which prints the LD_PRELOAD the loader of a dynamic
 *                             program would have read (a daemon that saved its environment
 *                             before confining itself)
 *
 * Prints "confined ok" and exits 0; killed by SIGSYS if anything makes a process after a
 * filter is in. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define FORBID(nr)                                 \
  BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), \
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS)

static void *volatile keep[4];

#define ALLOW(nr) \
  BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)

#define REFUSE(nr)                                 \
  BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), \
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EACCES)

/* What this program calls after confining itself (its allocations, its output, its exit)
 * and what any program's C library calls on its own (futex, signal masks, the clocks'
 * fallback); opening a file is answered EACCES (OpenSSH's pre-authentication sandbox does
 * so); everything else kills it, as a filter built with libseccomp's
 * seccomp_init(SCMP_ACT_KILL_PROCESS) and a list of seccomp_rule_add(SCMP_ACT_ALLOW). */
static struct sock_filter allowlist[] = {
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
    REFUSE(SYS_open),
    REFUSE(SYS_openat), /* allowlist-syscall allows both (ioctl still not) */
    ALLOW(SYS_read),
    ALLOW(SYS_write),
    ALLOW(SYS_close),
    ALLOW(SYS_fstat),
    ALLOW(SYS_newfstatat),
    ALLOW(SYS_mmap),
    ALLOW(SYS_munmap),
    ALLOW(SYS_mremap),
    ALLOW(SYS_madvise),
    ALLOW(SYS_brk),
    ALLOW(SYS_futex),
    ALLOW(SYS_rt_sigprocmask),
    ALLOW(SYS_rt_sigreturn),
    ALLOW(SYS_clock_gettime),
    ALLOW(SYS_exit),
    ALLOW(SYS_exit_group),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
};

static struct sock_filter prctl_killer[] = {
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
    FORBID(SYS_prctl),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
};

/* The seccomp system call made without libc's syscall() (a program's own assembly, as
 * Chromium's and Go's runtimes make theirs). */
static long raw_seccomp_filter(struct sock_fprog *prog) {
#if defined(__x86_64__)
  long result;
  register long flags __asm__("rsi") = 0;
  register void *arg __asm__("rdx") = prog;
  __asm__ volatile("syscall"
                   : "=a"(result)
                   : "a"((long)SYS_seccomp), "D"((long)SECCOMP_SET_MODE_FILTER), "r"(flags),
                     "r"(arg)
                   : "rcx", "r11", "memory");
  return result;
#else
  return syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, prog);
#endif
}

__attribute__((noinline)) static void hot_syscall(void) {
  for (unsigned i = 0; i < 100000u; i++) syscall(SYS_getppid);
}

int main(int argc, char **argv) {
  if (argc < 2) return 1;
  struct sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      FORBID(SYS_clone),
      FORBID(SYS_clone3),
      FORBID(SYS_fork),
      FORBID(SYS_vfork),
      FORBID(SYS_execve),
      FORBID(SYS_execveat),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {sizeof filter / sizeof filter[0], filter};
  const bool filter_mode = strcmp(argv[1], "prctl") == 0 || strcmp(argv[1], "syscall") == 0;
  if (filter_mode && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return 2;
  if (strcmp(argv[1], "prctl") == 0) {
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) return 3;
  } else if (strcmp(argv[1], "syscall") == 0) {
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) return 3;
  } else if (strncmp(argv[1], "allowlist-", 10) == 0 || strncmp(argv[1], "prctl-killer", 12) == 0) {
    const bool killer = argv[1][0] == 'p';
    struct sock_fprog list = {killer ? sizeof prctl_killer / sizeof prctl_killer[0]
                                     : sizeof allowlist / sizeof allowlist[0],
                              killer ? prctl_killer : allowlist};
    printf("confining\n"); /* stdout's buffer and its fstat before the filter, as daemons */
    fflush(stdout);
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return 2;
    const long e = killer ? raw_seccomp_filter(&list)
                   : strcmp(argv[1], "allowlist-prctl") == 0
                       ? prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &list)
                   : strcmp(argv[1], "allowlist-syscall") == 0
                       ? (allowlist[2].k = allowlist[4].k = SECCOMP_RET_ALLOW,
                          syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &list))
                       : -1;
    if (e != 0) return 3;
  } else if (strcmp(argv[1], "hot-syscall") == 0) {
    hot_syscall();
    return 0;
  } else if (strcmp(argv[1], "container") == 0) {
    struct sock_filter allow[] = {BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
    struct sock_fprog allow_all = {1, allow};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &allow_all) != 0)
      return 3;
    execl("/proc/self/exe", argv[0], "allocate", (char *)NULL);
    return 5;
  } else if (strcmp(argv[1], "allocate") == 0) {
    /* below */
  } else if (strcmp(argv[1], "chroot-exec") == 0 && argc > 2) {
    extern char **environ;
    size_t count = 0;
    while (environ[count]) count++;
    char **const saved = calloc(count + 1, sizeof *saved);
    if (!saved) return 4;
    memcpy(saved, environ, count * sizeof *saved);
    if (chroot(argv[2]) != 0 || chdir("/") != 0) return 3;
    char *const args[] = {"victim_static", "env", NULL};
    fflush(stdout);
    execve("/victim_static", args, saved);
    return 5;
  } else if (strcmp(argv[1], "chroot") == 0 && argc > 2) {
    if (chroot(argv[2]) != 0 || chdir("/") != 0) return 3;
    /* What an exec here would have the loader complain of ("cannot be preloaded"). */
    const char *const preload = getenv("LD_PRELOAD");
    for (const char *p = preload ? preload : ""; *p;) {
      const size_t len = strcspn(p, " :");
      char name[4096];
      snprintf(name, sizeof name, "%.*s", (int)len, p);
      if (len && access(name, R_OK) != 0) printf("unreachable preload %s\n", name);
      p += len;
      p += strspn(p, " :");
    }
  } else {
    return 1;
  }
  for (int i = 0; i < 4; i++) {
    keep[i] = malloc((size_t)64 << 20);
    if (!keep[i]) return 4;
    memset(keep[i], i, 4096);
  }
  if (strcmp(argv[1], "prctl-killer-exec") == 0) {
    fflush(stdout);
    execl("/proc/self/exe", argv[0], "allocate", (char *)NULL);
    return 5;
  }
  printf("confined ok\n");
  return 0;
}
