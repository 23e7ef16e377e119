# SPDX-License-Identifier: MIT
# The core codecs must run without an OS: their object code may only call the handful of
# libc functions every freestanding environment provides (mem*, strlen) — no malloc, no
# stdio, no system calls. Lists the undefined symbols of libcts_core.a and fails on others.
execute_process(COMMAND ${NM} -u --format=posix ${CORE_LIB} OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nm failed on ${CORE_LIB}")
endif()
set(allowed memcpy memmove memset memcmp memchr strlen __stack_chk_fail _GLOBAL_OFFSET_TABLE_)
string(REPLACE "\n" ";" lines "${out}")
set(bad "")
foreach(line IN LISTS lines)
  string(REGEX MATCH "^[^ ]+" sym "${line}")
  if(sym STREQUAL "" OR sym MATCHES ":$")
    continue()
  endif()
  list(FIND allowed "${sym}" idx)
  # Symbols the core defines itself (cts_*) appear as undefined across its own objects.
  if(idx EQUAL -1 AND NOT sym MATCHES "^cts_")
    list(APPEND bad "${sym}")
  endif()
endforeach()
list(REMOVE_DUPLICATES bad)
if(bad)
  message(FATAL_ERROR "the freestanding core uses OS/libc symbols: ${bad}")
endif()
message(STATUS "core links only against: ${allowed}")
