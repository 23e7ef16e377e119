/* SPDX-License-Identifier: MIT */
/* Shared by the files of the preload library. */
#ifndef CTS_PRELOAD_INTERNAL_H
#define CTS_PRELOAD_INTERNAL_H

/* The value of environment variable `name`, or NULL. Reads `environ` directly: getenv may
 * not be called this early, and nothing here may allocate (STYLE rule 36). */
const char *cts__preload_env(const char *name);

#endif /* CTS_PRELOAD_INTERNAL_H */
