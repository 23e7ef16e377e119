# SPDX-License-Identifier: MIT
# The dynamic symbols libctfscope.so defines are exactly the functions and variables that
# include/ctfscope/*.h declare with CTS_API: nothing internal leaks (hidden visibility
# everywhere else), and nothing public is missing (a declaration without its definition in
# the library would only fail at a user's link).
cmake_minimum_required(VERSION 3.25)
execute_process(COMMAND ${NM} -D --defined-only ${LIB} OUTPUT_VARIABLE nm_out
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nm -D ${LIB} failed (${rc})")
endif()
string(REGEX MATCHALL "[0-9a-f]+ [A-Za-z] [A-Za-z_0-9@.]+" lines "${nm_out}")
set(exported "")
foreach(line IN LISTS lines)
  string(REGEX REPLACE "^[0-9a-f]+ ([A-Za-z]) ([A-Za-z_0-9]+).*$" "\\1;\\2" parts "${line}")
  list(GET parts 0 kind)
  list(GET parts 1 name)
  # A (absolute) symbols are the linker's version nodes, not ours.
  if(NOT kind STREQUAL "A" AND NOT name MATCHES "^(_init|_fini)$")
    list(APPEND exported ${name})
  endif()
endforeach()

set(declared "")
file(GLOB headers ${HEADERS}/*.h)
foreach(h IN LISTS headers)
  file(READ ${h} text)
  string(REGEX REPLACE "#[^\n]*" "" text "${text}") # the macro's own definitions
  string(REPLACE ";" "@" text "${text}")              # ';' separates CMake list items
  # "CTS_API <type> [*]name(" and "extern CTS_API <type> name;" (';' read as '@').
  string(REGEX MATCHALL "CTS_API[^@({}/]*[ *]([A-Za-z_][A-Za-z_0-9]*)[ \n]*[(@]" decls "${text}")
  foreach(d IN LISTS decls)
    string(REGEX REPLACE "^.*[ *]([A-Za-z_][A-Za-z_0-9]*)[ \n]*[(@]$" "\\1" name "${d}")
    list(APPEND declared ${name})
  endforeach()
endforeach()
list(REMOVE_DUPLICATES exported)
list(REMOVE_DUPLICATES declared)
list(SORT exported)
list(SORT declared)
# tracer.h's API is not in libctfscope (its tracer is the preload library's).
file(READ ${HEADERS}/tracer.h tracer_text)
set(missing "")
foreach(name IN LISTS declared)
  if(NOT name IN_LIST exported AND NOT tracer_text MATCHES "[ *]${name}\\(")
    list(APPEND missing ${name})
  endif()
endforeach()
set(extra "")
foreach(name IN LISTS exported)
  if(NOT name IN_LIST declared)
    list(APPEND extra ${name})
  endif()
endforeach()
list(LENGTH exported n)
if(missing OR extra)
  message(FATAL_ERROR "libctfscope.so exports ${n} symbols\n"
                      "declared CTS_API but not exported: ${missing}\n"
                      "exported but not declared CTS_API: ${extra}")
endif()
if(n LESS 50)
  message(FATAL_ERROR "only ${n} symbols found: the check is not reading the library")
endif()
message(STATUS "libctfscope.so exports the ${n} CTS_API symbols of include/ctfscope/")
