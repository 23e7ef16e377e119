/* SPDX-License-Identifier: MIT */
/* The one rule for the numbers of environment settings (MEMTRACE_RATE, MEMTRACE_DROP,
 * CTFSCOPE_COMPRESS's level, CTFSCOPE_STALL_TIMEOUT, CTFSCOPE_TASKS_SIZE...): white space
 * around the value is not part of it. A value written in a shell script or a unit file
 * often carries a space or a newline at either end; strtod skipped the leading one and
 * refused the trailing one, so " 1e-6" was taken and "1e-6 " refused the whole trace.
 * Pure function, thread-safe, no allocation (the preload reads settings from its
 * constructor). */
#ifndef CTS_COMMON_SETTING_TEXT_H
#define CTS_COMMON_SETTING_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

/* Whether c is white space as the C locale's isspace says (no locale is consulted). */
static inline bool cts_setting_is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

/* Copies `value` without the white space at either end into out[0, size), NUL-terminated,
 * for the strict parsers that follow (which then require their number to end at the NUL).
 * False when nothing but white space is left, or it does not fit (no number of a setting
 * is that long). */
static inline bool cts_setting_trimmed(const char *value, char *out, size_t size) {
  while (cts_setting_is_space(*value)) value++;
  size_t len = strlen(value);
  while (len && cts_setting_is_space(value[len - 1])) len--;
  if (len == 0 || len >= size) return false;
  memcpy(out, value, len);
  out[len] = '\0';
  return true;
}

#endif /* CTS_COMMON_SETTING_TEXT_H */
