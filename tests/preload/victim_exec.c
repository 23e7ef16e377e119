/* SPDX-License-Identifier: MIT */
/* Allocates 55555-byte blocks, then execs itself with "after" through the function named
 * by argv[1] (execv by default; execve, execvp, execvpe, execl, execlp, execle, fexecve,
 * execveat, and the raw system calls by syscall(): syscall-execve, syscall-execveat): the new image
 * allocates 66666-byte blocks and exits with 7. Traced, the new image goes on tracing into the next
 * file (tracer.h, "Processes"). With "fork-exec", a forked child execs itself instead (the child is
 * not traced) and the parent exits with its status.
 *
 * With "stopped-writer" (traced, writer process): stops its own writer process (SIGSTOP;
 * found as the process holding the trace file, $MEMTRACE, open) before the exec, and the
 * new image continues it (SIGCONT) first thing. An exec that waits for the writer never
 * happens: after 10 s an alarm continues the writer and the image exits with 3. With
 * "stopped-writer-late", the new image leaves that to a child of its own, 300 ms later,
 * and exits at once: the old image's trace is finished after the program has exited.
 *
 * With "stray-child", it execs itself at once, handing the new image the children it had
 * (the tracer's intermediate process, just made); the new image exits with 7 if none of them
 * is still its child (alive or a zombie nobody will reap), else with 9. "vfork-stray-child"
 * first runs /bin/true from a vfork'd child, then does the same.
 *
 * With "stopped-then-exec", it closes every descriptor from 3 up (the writer process's
 * pipe with them: the trace ends at the next exec, complete), makes an exec that fails,
 * then execs itself with the environment it started with (read from /proc/self/environ, as
 * a program that re-executes itself can): that environment still names this image's trace,
 * which the new image must not write over.
 *
 * With "subreaper-wait-all", it makes itself a child subreaper (PR_SET_CHILD_SUBREAPER,
 * which an exec keeps; init-like programs, container shims) and execs itself with
 * "wait-all": that image forks one child and reaps children until there are none, as such
 * programs do before they exit. It prints how many it reaped and exits with 7 if each was
 * its own, 9 if another process was its child, and dies of SIGALRM after 10 s if one never
 * ends (a writer process waiting for the program's end).
 *
 * With "subreaper-filter-wait-all", the same with a seccomp filter put in (prctl
 * PR_SET_SECCOMP; it allows every call) after PR_SET_CHILD_SUBREAPER and before the exec:
 * the image exec'd knows of the filter (CTFSCOPE_EXEC_SECCOMP) and asks no prctl. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "victim.h"

extern char **environ;

static pid_t stopped_writer;

static void give_up(int sig) {
  (void)sig;
  kill(stopped_writer, SIGCONT);
  _exit(3);
}

/* MEMTRACE as this process started with it (the preload library removes it from
 * `environ`), or NULL. */
static const char *initial_memtrace(void) {
  static char env[1 << 16];
  FILE *const f = fopen("/proc/self/environ", "r");
  if (!f) return NULL;
  const size_t n = fread(env, 1, sizeof env - 1, f);
  fclose(f);
  env[n] = '\0';
  for (size_t i = 0; i < n; i += strlen(env + i) + 1)
    if (strncmp(env + i, "MEMTRACE=", 9) == 0) return env + i + 9;
  return NULL;
}

/* The parent of process `pid`, 0 if unknown. */
static pid_t parent_of(pid_t pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *const f = fopen(path, "r");
  int ppid = 0;
  if (f) {
    /* "PID (COMM) STATE PPID": the name ends at the last ')'. */
    char line[512];
    const char *const end = fgets(line, sizeof line, f) ? strrchr(line, ')') : NULL;
    if (!end || sscanf(end + 1, " %*c %d", &ppid) != 1) ppid = 0;
    fclose(f);
  }
  return (pid_t)ppid;
}

/* Another process that holds `path` open and is not this one's child (the intermediate
 * process that makes the writer is): the writer process. 0 if none. */
static pid_t holder_of(const char *path) {
  char want[PATH_MAX];
  if (!realpath(path, want)) return 0;
  DIR *const procs = opendir("/proc");
  if (!procs) return 0;
  pid_t found = 0;
  for (struct dirent *p; !found && (p = readdir(procs));) {
    const pid_t pid = (pid_t)atoi(p->d_name);
    if (pid <= 0 || pid == getpid() || parent_of(pid) == getpid()) continue;
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%d/fd", (int)pid);
    DIR *const fds = opendir(dir);
    if (!fds) continue;
    for (struct dirent *f; !found && (f = readdir(fds));) {
      char link[128], target[PATH_MAX];
      snprintf(link, sizeof link, "%s/%s", dir, f->d_name);
      const ssize_t n = readlink(link, target, sizeof target - 1);
      if (n <= 0) continue;
      target[n] = '\0';
      if (strcmp(target, want) == 0) found = pid;
    }
    closedir(fds);
  }
  closedir(procs);
  return found;
}

/* The environment this process started with, from /proc/self/environ (NULL-terminated in
 * a static array), or NULL. */
static char **initial_environment(void) {
  static char env[1 << 16];
  static char *list[512];
  FILE *const f = fopen("/proc/self/environ", "r");
  if (!f) return NULL;
  const size_t n = fread(env, 1, sizeof env - 1, f);
  fclose(f);
  env[n] = '\0';
  size_t k = 0;
  for (size_t i = 0; i < n && k + 1 < sizeof list / sizeof *list; i += strlen(env + i) + 1)
    list[k++] = env + i;
  list[k] = NULL;
  return list;
}

static void exec_self(const char *how, char *argv0) {
  static const char self[] = "/proc/self/exe";
  char *args[] = {argv0, "after", NULL};
  if (strcmp(how, "execve") == 0)
    execve(self, args, environ);
  else if (strcmp(how, "execvp") == 0)
    execvp(self, args);
  else if (strcmp(how, "execvpe") == 0)
    execvpe(self, args, environ);
  else if (strcmp(how, "execl") == 0)
    execl(self, argv0, "after", (char *)NULL);
  else if (strcmp(how, "execlp") == 0)
    execlp(self, argv0, "after", (char *)NULL);
  else if (strcmp(how, "execle") == 0)
    execle(self, argv0, "after", (char *)NULL, environ);
  else if (strcmp(how, "fexecve") == 0)
    fexecve(open(self, O_RDONLY | O_CLOEXEC), args, environ);
  else if (strcmp(how, "execveat") == 0) /* relative to a directory's descriptor */
    execveat(open("/proc/self", O_RDONLY | O_DIRECTORY | O_CLOEXEC), "exe", args, environ, 0);
  else if (strcmp(how, "syscall-execve") == 0) /* a program's own system call */
    syscall(SYS_execve, self, args, environ);
  else if (strcmp(how, "syscall-execveat") == 0)
    syscall(SYS_execveat, open(self, O_RDONLY | O_CLOEXEC), "", args, environ, AT_EMPTY_PATH);
  else
    execv(self, args);
}

/* This process's children, as /proc lists them ("PID PID ..."), "" if unknown. */
static void own_children(char *buf, size_t size) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)getpid(), (int)getpid());
  FILE *const f = fopen(path, "r");
  buf[0] = '\0';
  if (f && !fgets(buf, (int)size, f)) buf[0] = '\0';
  if (f) fclose(f);
}

/* Whether PID `pid` is in the list own_children gives. */
static int listed(const char *list, long pid) {
  for (char *end; *list; list = end) {
    const long p = strtol(list, &end, 10);
    if (end == list) break;
    if (p == pid) return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  victim_quiet_stdio();
  if (argc > 1 && strcmp(argv[1], "vfork-stray-child") == 0) {
    /* A vfork'd child that execs runs the preload's exec hook on this process's memory. */
    const pid_t child = vfork();
    if (child == 0) {
      execl("/bin/true", "true", (char *)NULL);
      _exit(127);
    }
    if (child < 0 || waitpid(child, NULL, 0) != child) return 2;
    char before[512];
    own_children(before, sizeof before);
    execl("/proc/self/exe", argv[0], "stray-check", before, (char *)NULL);
    return 2;
  }
  if (argc > 1 && (strcmp(argv[1], "subreaper-wait-all") == 0 ||
                   strcmp(argv[1], "subreaper-filter-wait-all") == 0)) {
    if (prctl(PR_SET_CHILD_SUBREAPER, 1L) != 0) return 2;
    if (strcmp(argv[1], "subreaper-filter-wait-all") == 0) {
      struct sock_filter allow = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
      struct sock_fprog prog = {.len = 1, .filter = &allow};
      if (prctl(PR_SET_NO_NEW_PRIVS, 1L, 0L, 0L, 0L) != 0 ||
          prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0L, 0L) != 0)
        return 2;
    }
    execl("/proc/self/exe", argv[0], "wait-all", (char *)NULL);
    return 2;
  }
  if (argc > 1 && strcmp(argv[1], "wait-all") == 0) {
    alarm(10);
    for (int i = 0; i < 10; i++) free(malloc(66666));
    const pid_t mine = fork();
    if (mine == 0) _exit(0);
    if (mine < 0) return 2;
    int reaped = 0, others = 0;
    for (pid_t pid; (pid = wait(NULL)) > 0;) {
      reaped++;
      others += pid != mine;
    }
    printf("reaped %d\n", reaped);
    return others ? 9 : 7;
  }
  if (argc > 1 && strcmp(argv[1], "stray-child") == 0) {
    char before[512];
    own_children(before, sizeof before);
    execl("/proc/self/exe", argv[0], "stray-check", before, (char *)NULL);
    return 2;
  }
  if (argc > 2 && strcmp(argv[1], "stray-check") == 0) {
    for (int i = 0; i < 10; i++) free(malloc(66666));
    char now[512];
    own_children(now, sizeof now);
    const char *p = argv[2];
    for (char *end; *p; p = end) {
      const long pid = strtol(p, &end, 10);
      if (end == p) break;
      if (listed(now, pid)) return 9;
    }
    return 7;
  }
  if (argc > 2 && (strcmp(argv[1], "continue") == 0 || strcmp(argv[1], "continue-late") == 0)) {
    alarm(0); /* the alarm outlives the exec */
    const pid_t writer = (pid_t)atoi(argv[2]);
    if (writer > 0 && strcmp(argv[1], "continue-late") == 0) {
      if (fork() == 0) {
        usleep(300000);
        kill(writer, SIGCONT);
        _exit(0);
      }
    } else if (writer > 0) {
      kill(writer, SIGCONT);
    }
    for (int i = 0; i < 10; i++) free(malloc(66666));
    printf("after exec\n");
    return 7;
  }
  if (argc > 1 && strcmp(argv[1], "after") == 0) {
    for (int i = 0; i < 10; i++) free(malloc(66666));
    printf("after exec\n");
    return 7;
  }
  for (int i = 0; i < 10; i++) free(malloc(55555));
  void *kept = malloc(55555);
  printf("before exec\n");
  fflush(stdout);
  if (argc > 1 && strcmp(argv[1], "fork-exec") == 0) {
    const pid_t pid = fork();
    if (pid == 0) {
      exec_self("execv", argv[0]);
      _exit(2);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    free(kept);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 2;
  }
  if (argc > 1 && strncmp(argv[1], "stopped-writer", 14) == 0) {
    const char *const trace = initial_memtrace();
    char pid[16];
    /* The writer process is made while the program runs: looked for up to 10 s. */
    for (int i = 0; trace && i < 10000 && !(stopped_writer = holder_of(trace)); i++) usleep(1000);
    snprintf(pid, sizeof pid, "%d", (int)stopped_writer);
    if (stopped_writer > 0) {
      signal(SIGALRM, give_up);
      alarm(10);
      kill(stopped_writer, SIGSTOP);
    }
    execl("/proc/self/exe", argv[0],
          strcmp(argv[1], "stopped-writer-late") == 0 ? "continue-late" : "continue", pid,
          (char *)NULL);
    return 2;
  }
  if (argc > 1 && strcmp(argv[1], "stopped-then-exec") == 0) {
    char **const started_with = initial_environment();
    char *args[] = {argv[0], "after", NULL};
    closefrom(3);
    execve("/nonexistent/victim_exec", args, environ);
    if (started_with) execve("/proc/self/exe", args, started_with);
    return 2;
  }
  exec_self(argc > 1 ? argv[1] : "execv", argv[0]);
  free(kept);
  return 2;
}
