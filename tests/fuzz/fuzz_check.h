/* SPDX-License-Identifier: MIT */
/* The fuzz targets' invariant check: abort() when cond is false, in every build (NDEBUG or
 * not), which libFuzzer and the replay driver both report as a failing input. */
#ifndef CTS_FUZZ_CHECK_H
#define CTS_FUZZ_CHECK_H

#include <stdlib.h>

#define CHECK(cond)       \
  do {                    \
    if (!(cond)) abort(); \
  } while (0)

#endif /* CTS_FUZZ_CHECK_H */
