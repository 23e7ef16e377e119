/* SPDX-License-Identifier: MIT */
/* The tables of the default kernel (`unikernel`), whose codes the host names from its ELF
 * file: empty, with the same code referring to them as the generated ones, so that this
 * kernel is also the first link of unikernel_embedded (CMakeLists.txt). */
#include "ksyms.h"

const ksym_t ksyms[1];
const size_t ksyms_count = 0;
const kline_t klines[1];
const size_t klines_count = 0;
const char *const kfiles[1];
