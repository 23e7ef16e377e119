# SPDX-License-Identifier: MIT
# The tracer's files keep their seams (src/tracer/tracer_state.h, session.h, service.h):
#  - service.c reaches the tracer only through session.h and tracer_internal.h: it includes
#    neither tracer_state.h nor anything but those, os/net.h, common/*.h (utilities below
#    every component) and system headers;
#  - the files that define what service.c calls never call the service back (no cycle);
#  - only tracer.c (the API) and service.c itself name the service's functions;
#  - the preload library reaches the tracer through tracer_internal.h, never its state.
# Usage: cmake -DSRC=<source dir> -P check_seams.cmake
if(NOT SRC)
  message(FATAL_ERROR "usage: cmake -DSRC=<source dir> -P check_seams.cmake")
endif()
set(dir ${SRC}/src/tracer)
set(failures "")

file(READ ${dir}/service.c service)
string(REGEX MATCHALL "#include [<\"][^>\"]+[>\"]" includes "${service}")
foreach(inc IN LISTS includes)
  if(inc MATCHES "\"" AND NOT inc MATCHES "\"(session\\.h|service\\.h|tracer_internal\\.h|os/net\\.h|common/[a-z_]+\\.h)\"")
    list(APPEND failures "service.c: ${inc} (only session.h, service.h, tracer_internal.h, os/net.h, common/*.h)")
  endif()
endforeach()

# What service.c calls of the rest of the tracer, and where each is defined.
string(REGEX MATCHALL "cts__[a-z_]+\\(" called "${service}")
list(REMOVE_DUPLICATES called)
file(GLOB sources ${dir}/*.c)
foreach(call IN LISTS called)
  string(REPLACE "(" "" name "${call}")
  if(name MATCHES "^cts__(service_|guard_)")
    continue() # its own, and the thread guard (inline in tracer_internal.h)
  endif()
  set(found "")
  foreach(file IN LISTS sources)
    file(STRINGS ${file} defs REGEX "^[a-z][a-z_0-9 *]* \\**${name}\\(.*[^;]$")
    if(defs)
      get_filename_component(base ${file} NAME)
      set(found ${base})
      file(READ ${file} text)
      if(text MATCHES "cts__service_")
        list(APPEND failures "${base} defines ${name} (used by service.c) and calls the service: a cycle")
      endif()
    endif()
  endforeach()
  if(NOT found)
    list(APPEND failures "service.c calls ${name}, defined in no src/tracer/*.c")
  endif()
endforeach()

foreach(file IN LISTS sources)
  get_filename_component(base ${file} NAME)
  if(base STREQUAL "tracer.c" OR base STREQUAL "service.c")
    continue()
  endif()
  file(READ ${file} text)
  if(text MATCHES "cts__service_[a-z_]+\\(")
    list(APPEND failures "${base} calls the service (only the API, tracer.c, may)")
  endif()
endforeach()

file(GLOB preload ${SRC}/src/preload/*.c ${SRC}/src/preload/*.h)
foreach(file IN LISTS preload)
  file(READ ${file} text)
  if(text MATCHES "tracer_state\\.h")
    get_filename_component(base ${file} NAME)
    list(APPEND failures "${base} includes tracer_state.h (the preload uses tracer_internal.h)")
  endif()
endforeach()

if(failures)
  list(JOIN failures "\n  " text)
  message(FATAL_ERROR "the tracer's seams are crossed:\n  ${text}")
endif()
message(STATUS "the tracer's seams hold")
