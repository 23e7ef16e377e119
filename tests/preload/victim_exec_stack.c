/* SPDX-License-Identifier: MIT */
/* A program that execs from a small stack, as a coroutine (makecontext) or a thread made
 * with pthread_attr_setstacksize(PTHREAD_STACK_MIN) may:
 *
 *   victim_exec_stack depth PROGRAM  on a 256 KiB stack filled with a pattern, execvp
 *                             PROGRAM (a bare name is searched in PATH) with an argument
 *                             list too long for the kernel (E2BIG: the exec hooks do all
 *                             their work, then the exec fails), and execv of it by the path
 *                             found; prints "execvp N" and "execv N", the bytes of stack
 *                             each call used (the deepest byte the pattern lost)
 *   victim_exec_stack run SIZE PROGRAM [ARG...]  execvp PROGRAM from a stack of SIZE
 *                             bytes with an inaccessible page just under it: an exec that
 *                             needs more stack dies by SIGSEGV
 *
 * Exits 2 on a usage error, 3 when the stack cannot be made, 4 when an exec did not fail as
 * it should (depth) or failed (run). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#define PATTERN     0xa5
#define DEPTH_STACK (256u << 10)

static ucontext_t caller, coroutine;
static char **exec_argv;
static int exec_by_path; /* 1: execvp; 0: execv */
static int exec_errno;

static void exec_on_this_stack(void) {
  if (exec_by_path)
    execvp(exec_argv[0], exec_argv);
  else
    execv(exec_argv[0], exec_argv);
  exec_errno = errno;
}

/* A stack of `size` bytes with an inaccessible page just below its lowest byte. */
static unsigned char *make_stack(size_t size) {
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  const size_t pages = (size + page - 1) / page * page;
  unsigned char *const map =
      mmap(NULL, pages + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED || mprotect(map, page, PROT_NONE) != 0) return NULL;
  return map + page;
}

static void run_on(unsigned char *stack, size_t size) {
  getcontext(&coroutine);
  coroutine.uc_stack.ss_sp = stack;
  coroutine.uc_stack.ss_size = size;
  coroutine.uc_link = &caller;
  makecontext(&coroutine, exec_on_this_stack, 0);
  swapcontext(&caller, &coroutine);
}

/* The bytes of `stack` used from its top: its lowest byte that lost the pattern. */
static size_t used(const unsigned char *stack, size_t size) {
  size_t low = 0;
  while (low < size && stack[low] == PATTERN) low++;
  return size - low;
}

/* One failing exec of argv on a fresh patterned stack: the bytes it used. */
static long depth_of(char **argv, int by_path) {
  unsigned char *const stack = make_stack(DEPTH_STACK);
  if (!stack) return -1;
  memset(stack, PATTERN, DEPTH_STACK);
  exec_argv = argv;
  exec_by_path = by_path;
  run_on(stack, DEPTH_STACK);
  return exec_errno == E2BIG ? (long)used(stack, DEPTH_STACK) : -2;
}

int main(int argc, char **argv) {
  if (argc >= 3 && strcmp(argv[1], "depth") == 0) {
    /* 24 arguments of 127 KiB: 3 MiB, past the kernel's limit (a quarter of an 8 MiB stack
     * limit, at most 3/4 of any). */
    enum { LONG_ARGS = 24, LONG_ARG = 127 << 10 };
    char **const args = calloc(LONG_ARGS + 2, sizeof *args);
    char *const text = malloc(LONG_ARG);
    if (!args || !text) return 3;
    memset(text, 'x', LONG_ARG - 1);
    text[LONG_ARG - 1] = '\0';
    args[0] = argv[2];
    for (int i = 1; i <= LONG_ARGS; i++) args[i] = text;
    const long by_path = depth_of(args, 1);
    char found[4096] = "";
    if (strchr(argv[2], '/')) {
      snprintf(found, sizeof found, "%s", argv[2]);
    } else { /* the program's path, for execv */
      const char *dir = getenv("PATH");
      for (; dir && *dir; dir += strcspn(dir, ":"), dir += *dir == ':') {
        snprintf(found, sizeof found, "%.*s/%s", (int)strcspn(dir, ":"), dir, argv[2]);
        if (access(found, X_OK) == 0) break;
        found[0] = '\0';
      }
    }
    args[0] = found;
    const long direct = found[0] ? depth_of(args, 0) : -3;
    printf("execvp %ld\nexecv %ld\n", by_path, direct);
    return by_path < 0 || direct < 0 ? 4 : 0;
  }
  if (argc >= 4 && strcmp(argv[1], "run") == 0) {
    const size_t size = (size_t)strtoul(argv[2], NULL, 10);
    unsigned char *const stack = size ? make_stack(size) : NULL;
    if (!stack) return 3;
    fflush(stdout);
    exec_argv = argv + 3;
    exec_by_path = 1;
    run_on(stack, size);
    fprintf(stderr, "victim_exec_stack: exec of %s: %s\n", argv[3], strerror(exec_errno));
    return 4;
  }
  return 2;
}
