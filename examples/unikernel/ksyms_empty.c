/* SPDX-License-Identifier: MIT */
/* The first link's tables: empty, with the same code referring to them as the generated
 * ones. */
#include "ksyms.h"

const ksym_t ksyms[1];
const size_t ksyms_count = 0;
const kline_t klines[1];
const size_t klines_count = 0;
const char *const kfiles[1];
