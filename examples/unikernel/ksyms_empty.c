/* SPDX-License-Identifier: MIT */
/* The first link's symbol table: empty, the same size of code as the generated one. */
#include "ksyms.h"

const ksym_t ksyms[1];
const size_t ksyms_count = 0;
