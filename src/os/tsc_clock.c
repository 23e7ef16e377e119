/* SPDX-License-Identifier: MIT */
#include "tsc_clock.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <ctfscope/errors.h>

#include "../common/clock.h"
#include "../common/cpu_counter.h"

/* Reads up to size - 1 bytes of a small /proc or /sys file; returns the length, -1. */
static ssize_t read_small_file(const char *path, char *buf, size_t size) {
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  size_t len = 0;
  while (len + 1 < size) {
    const ssize_t n = read(fd, buf + len, size - 1 - len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    len += (size_t)n;
  }
  close(fd);
  buf[len] = '\0';
  return (ssize_t)len;
}

/* Whether the line starting at @p line (up to '\n') has @p word as a whole word. */
static bool line_has_word(const char *line, const char *word) {
  const size_t n = strlen(word);
  const char *end = strchr(line, '\n');
  if (!end) end = line + strlen(line);
  for (const char *p = line; p + n <= end; p++) {
    if (memcmp(p, word, n) != 0) continue;
    const bool starts = p == line || p[-1] == ' ' || p[-1] == '\t';
    const bool ends = p + n == end || p[n] == ' ' || p[n] == '\t';
    if (starts && ends) return true;
  }
  return false;
}

bool cts_os_tsc_usable(void) {
#if CTS_HAVE_CPU_COUNTER
  /* The first processor's flags line is within the first few KiB. */
  char info[32768];
  if (read_small_file("/proc/cpuinfo", info, sizeof info) <= 0) return false;
  const char *flags = strncmp(info, "flags", 5) == 0 ? info : strstr(info, "\nflags");
  if (!flags) return false;
  flags += flags[0] == '\n';
  if (!line_has_word(flags, "constant_tsc") || !line_has_word(flags, "nonstop_tsc")) return false;
  char source[64];
  const ssize_t n = read_small_file(
      "/sys/devices/system/clocksource/clocksource0/current_clocksource", source, sizeof source);
  return n <= 0 || strncmp(source, "tsc", 3) == 0;
#else
  return false;
#endif
}

#if CTS_HAVE_CPU_COUNTER
/* One (counter, ns) pair: the clock read between two counter reads, from the tightest of a
 * few tries (a try that was preempted or interrupted brackets a long time). */
static void sample(uint64_t *counter, uint64_t *ns) {
  uint64_t best = UINT64_MAX;
  for (int i = 0; i < 9; i++) {
    const uint64_t before = cts__cpu_counter();
    const uint64_t t = cts_mono_ns();
    const uint64_t after = cts__cpu_counter();
    if (after - before < best) {
      best = after - before;
      *counter = before + (after - before) / 2;
      *ns = t;
    }
  }
}
#endif

int cts_os_tsc_calibrate(cts_tsc_clock_t *out, uint64_t window_ns) {
  memset(out, 0, sizeof *out);
#if CTS_HAVE_CPU_COUNTER
  if (!cts_os_tsc_usable() || window_ns == 0 || window_ns > 10000000000u) return CTS_E_STATE;
  uint64_t c0, n0, c1, n1;
  sample(&c0, &n0);
  struct timespec wait = {(time_t)(window_ns / 1000000000u), (long)(window_ns % 1000000000u)};
  while (nanosleep(&wait, &wait) != 0 && errno == EINTR) {}
  sample(&c1, &n1);
  if (c1 <= c0 || n1 <= n0) return CTS_E_STATE;
  /* (n1 - n0) < 2^34 (the window is at most 10 s), so the shift cannot overflow. */
  const uint64_t mult = ((n1 - n0) << 30) / (c1 - c0) << 2;
  if (mult == 0) return CTS_E_STATE;
  out->base_counter = c1;
  out->base_ns = n1;
  out->mult = mult;
  return 0;
#else
  (void)window_ns;
  return CTS_E_STATE;
#endif
}

/* 0: not calibrated, 1: a thread is calibrating, 2: done (no pthread_once: cts_os does not
 * link the threads library). */
static int calibration_state;
static cts_tsc_clock_t calibrated;
static int calibration_result = CTS_E_STATE;

int cts_os_tsc_clock(cts_tsc_clock_t *out) {
  int state = 0;
  if (__atomic_compare_exchange_n(&calibration_state, &state, 1, false, __ATOMIC_ACQUIRE,
                                  __ATOMIC_ACQUIRE)) {
    calibration_result = cts_os_tsc_calibrate(&calibrated, 10000000u);
    __atomic_store_n(&calibration_state, 2, __ATOMIC_RELEASE);
  } else {
    const struct timespec tick = {0, 1000000};
    while (__atomic_load_n(&calibration_state, __ATOMIC_ACQUIRE) != 2) nanosleep(&tick, NULL);
  }
  *out = calibrated;
  return calibration_result;
}
