/* SPDX-License-Identifier: MIT */
/* A long-running victim driven by commands on stdin, one per line, so that a test can
 * interleave its allocations with what a trace reader does:
 *   alloc N SIZE   N times malloc(SIZE) and free; replies "done N"
 *   wait-client K  waits (20 s at most) until the tracer serves its Kth client; "ok"
 *   wait-idle      waits until no client is served; "ok"
 *   quit           replies "allocs=A frees=F" and exits 0
 * The waits ask the preload library (cts_tracer_get_stats, found with dlsym); untraced,
 * they answer "ok" at once, so traced and untraced runs print the same. stdin is read
 * with read(2) and stdout has a static buffer: the only allocations are the commanded
 * ones. */
#define _GNU_SOURCE
#include <ctfscope/tracer.h>
#include <dlfcn.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "victim.h"

static unsigned long long allocs, frees;

static void sleep_ms(int ms) {
  struct timespec ts = {0, ms * 1000000L};
  nanosleep(&ts, NULL);
}

/* Waits until the tracer's stats satisfy the command; true at once when untraced. */
static bool wait_for(bool idle, unsigned long long clients) {
  void (*get_stats)(cts_tracer_stats_t *);
  void *const sym = dlsym(RTLD_DEFAULT, "cts_tracer_get_stats");
  if (!sym) return true;
  memcpy(&get_stats, &sym, sizeof sym);
  for (int i = 0; i < 2000; i++) {
    cts_tracer_stats_t st;
    get_stats(&st);
    if (idle ? !st.serving : st.serving && st.clients >= clients) return true;
    sleep_ms(10);
  }
  return false;
}

static void run(const char *line) {
  unsigned long long n, size;
  if (sscanf(line, "alloc %llu %llu", &n, &size) == 2) {
    for (unsigned long long i = 0; i < n; i++) {
      volatile char *p = malloc(size);
      p[0] = (char)i;
      allocs++;
      free((void *)p);
      frees++;
    }
    printf("done %llu\n", n);
  } else if (sscanf(line, "wait-client %llu", &n) == 1) {
    puts(wait_for(false, n) ? "ok" : "timeout");
  } else if (strcmp(line, "wait-idle") == 0) {
    puts(wait_for(true, 0) ? "ok" : "timeout");
  } else if (strcmp(line, "quit") == 0) {
    printf("allocs=%llu frees=%llu\n", allocs, frees);
    fflush(stdout);
    exit(0);
  } else {
    printf("unknown command: %s\n", line);
  }
  fflush(stdout);
}

int main(void) {
  victim_quiet_stdio();
  char buf[4096];
  size_t len = 0;
  for (;;) {
    const ssize_t n = read(0, buf + len, sizeof buf - 1 - len);
    if (n <= 0) break;
    len += (size_t)n;
    buf[len] = '\0';
    char *nl;
    while ((nl = strchr(buf, '\n')) != NULL) {
      *nl = '\0';
      run(buf);
      len -= (size_t)(nl + 1 - buf);
      memmove(buf, nl + 1, len + 1);
    }
    if (len == sizeof buf - 1) len = 0; /* an absurd line: dropped */
  }
  run("quit");
  return 0;
}
