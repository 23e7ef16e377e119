# SPDX-License-Identifier: MIT
# The core codecs must run without an OS and keep no state of their own (src/core/
# CMakeLists.txt). Two checks on the object code of libcts_core.a:
#  - undefined symbols: only the handful of libc functions every freestanding environment
#    provides (mem*, strlen): no malloc, no stdio, no system calls;
#  - sections: no writable data and no thread-local storage (.data, .bss, .tdata, .tbss
#    and their per-symbol .data.* variants, non-empty). Tables belong in .rodata; state
#    belongs in the caller's memory. Without this a global or __thread variable in core
#    would pass the symbol check unseen.
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

# objdump -h prints, per archive member, "In archive ...:" / "<member>:  file format ..."
# then one line per section: "Idx Name Size VMA LMA File-off Algn". `.data.rel.ro*` is
# read-only after relocation (pointer tables such as the event names) and is allowed.
execute_process(COMMAND ${OBJDUMP} -h ${CORE_LIB} OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "objdump failed on ${CORE_LIB}")
endif()
string(REPLACE "\n" ";" lines "${out}")
set(member "")
set(writable "")
foreach(line IN LISTS lines)
  if(line MATCHES "^([^ ]+\\.o):[ \t]+file format")
    set(member "${CMAKE_MATCH_1}")
  elseif(line MATCHES "^ *[0-9]+ +([^ ]+) +([0-9a-fA-F]+) ")
    set(section "${CMAKE_MATCH_1}")
    set(size "${CMAKE_MATCH_2}")
    if(section MATCHES "^\\.data\\.rel\\.ro")
      continue()
    endif()
    if(section MATCHES "^\\.(data|bss|tdata|tbss)(\\.|$)" AND NOT size MATCHES "^0+$")
      list(APPEND writable "${member}:${section}(0x${size})")
    endif()
  endif()
endforeach()
if(writable)
  list(JOIN writable " " writable)
  message(FATAL_ERROR "the core keeps writable or thread-local state: ${writable}")
endif()
message(STATUS "core links only against ${allowed}; no .data, .bss, .tdata or .tbss")
