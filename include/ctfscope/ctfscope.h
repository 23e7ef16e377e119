/* SPDX-License-Identifier: MIT */
/** @file ctfscope.h Umbrella header: everything public in libctfscope (ring.h needs POSIX). */
#ifndef CTFSCOPE_CTFSCOPE_H
#define CTFSCOPE_CTFSCOPE_H

#include "common.h"
#include "errors.h"
#include "memtrace.h"
#include "mprof.h"
#include "ring.h"
#include "tasks.h"
#include <ctfscope/version.h>

#endif /* CTFSCOPE_CTFSCOPE_H */
