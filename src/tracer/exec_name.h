/* SPDX-License-Identifier: MIT */
/* The name of the trace file of a process's Nth exec'd image (tracer.h, "Processes"):
 * shared by the preload library, which names the files, and `ctfscope record`, which
 * reports them. */
#ifndef CTS_TRACER_EXEC_NAME_H
#define CTS_TRACER_EXEC_NAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* "trace.ctf", 2 -> "trace.exec2.ctf"; "trace.ctf.zst", 2 -> "trace.exec2.ctf.zst";
 * "trace", 2 -> "trace.exec2"; index 0 -> the base. Returns false if the name does not fit
 * in size bytes. */
static inline bool cts__exec_trace_name(char *out, size_t size, const char *base, unsigned index) {
  int n;
  const size_t len = strlen(base);
  if (index == 0)
    n = snprintf(out, size, "%s", base);
  else if (len > 8 && strcmp(base + len - 8, ".ctf.zst") == 0)
    n = snprintf(out, size, "%.*s.exec%u.ctf.zst", (int)(len - 8), base, index);
  else if (len > 4 && strcmp(base + len - 4, ".ctf") == 0)
    n = snprintf(out, size, "%.*s.exec%u.ctf", (int)(len - 4), base, index);
  else
    n = snprintf(out, size, "%s.exec%u", base, index);
  return n >= 0 && (size_t)n < size;
}

#endif /* CTS_TRACER_EXEC_NAME_H */
