# SPDX-License-Identifier: MIT
# Installs the build tree into PREFIX and builds examples/ as a user's programs would, from
# the installed files only:
#  1. with `pkg-config --cflags --libs ctfscope` and nothing else (task_ring, write_trace);
#  2. with find_package(ctfscope) in a CMake project (tests/install/consumer/), linking
#     ctfscope::ctfscope and ctfscope::ctfscope_static.
# Every program is run; the libctfscope.so they load can only be the installed one (the
# build tree's is on no search path, and PREFIX/LIBDIR is given through LD_LIBRARY_PATH).
cmake_minimum_required(VERSION 3.25)
file(REMOVE_RECURSE ${PREFIX} ${WORK})
file(MAKE_DIRECTORY ${WORK})

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${ARGN}\n${out}\n${err}")
  endif()
  set(run_out "${out}" PARENT_SCOPE)
endfunction()

run("cmake --install" ${CMAKE_COMMAND} --install ${BUILD} --prefix ${PREFIX})
foreach(f include/ctfscope/tasks.h include/ctfscope/ring.h include/ctfscope/version.h
          ${LIBDIR}/libctfscope.so ${LIBDIR}/libctfscope.a ${LIBDIR}/pkgconfig/ctfscope.pc
          ${LIBDIR}/cmake/ctfscope/ctfscope-config.cmake)
  if(NOT EXISTS ${PREFIX}/${f})
    message(FATAL_ERROR "not installed: ${PREFIX}/${f}")
  endif()
endforeach()

# 1. pkg-config only. PKG_CONFIG_LIBDIR: no other .pc file can answer for ctfscope.
find_program(PKG_CONFIG pkg-config REQUIRED)
set(ENV{PKG_CONFIG_LIBDIR} ${PREFIX}/${LIBDIR}/pkgconfig)
run("pkg-config" ${PKG_CONFIG} --cflags --libs ctfscope)
string(STRIP "${run_out}" pc_flags)
separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
if(NOT pc_flags MATCHES "-I${PREFIX}/" OR NOT pc_flags MATCHES "-L${PREFIX}/")
  message(FATAL_ERROR "pkg-config does not point into ${PREFIX}: ${pc_flags}")
endif()
separate_arguments(extra UNIX_COMMAND "${EXTRA_FLAGS}")
set(ENV{LD_LIBRARY_PATH} ${PREFIX}/${LIBDIR})
foreach(prog task_ring write_trace)
  run("cc ${prog}.c" ${CC} -std=gnu11 -Wall -Werror ${extra} ${SRC}/examples/${prog}.c
      ${pc_flags} -o ${WORK}/${prog})
endforeach()
run("task_ring (pkg-config)" ${WORK}/task_ring ${WORK}/ring.ctf)
message(STATUS "task_ring, built with pkg-config: ${run_out}")
run("ctfscope dump" ${CTFSCOPE} dump ${WORK}/ring.ctf)
if(NOT run_out MATCHES "label=\"job\"")
  message(FATAL_ERROR "the installed library's trace has no job label:\n${run_out}")
endif()
run("write_trace (pkg-config)" ${WORK}/write_trace ${WORK}/demo.ctf)
run("ctfscope info" ${CTFSCOPE} info ${WORK}/demo.ctf)
run("ldd task_ring" ldd ${WORK}/task_ring)
if(NOT run_out MATCHES "libctfscope.so.0 => ${PREFIX}/${LIBDIR}/libctfscope.so.0")
  message(FATAL_ERROR "task_ring does not load the installed library:\n${run_out}")
endif()

# 2. find_package(ctfscope), shared and static.
unset(ENV{PKG_CONFIG_LIBDIR})
run("consumer configure" ${CMAKE_COMMAND} -S ${SRC}/tests/install/consumer -B ${WORK}/consumer
    -DCMAKE_PREFIX_PATH=${PREFIX} -DCMAKE_C_COMPILER=${CC} "-DCMAKE_C_FLAGS=${EXTRA_FLAGS}"
    -DCTS_EXAMPLES=${SRC}/examples)
run("consumer build" ${CMAKE_COMMAND} --build ${WORK}/consumer)
run("task_ring (find_package)" ${WORK}/consumer/task_ring ${WORK}/ring2.ctf)
run("write_trace (find_package, static)" ${WORK}/consumer/write_trace_static ${WORK}/demo2.ctf)
run("ldd write_trace_static" ldd ${WORK}/consumer/write_trace_static)
if(run_out MATCHES "libctfscope")
  message(FATAL_ERROR "write_trace_static loads libctfscope.so:\n${run_out}")
endif()
run("ctfscope info" ${CTFSCOPE} info ${WORK}/demo2.ctf)

# 3. The tracer as installed: the writer executable is a helper in LIBEXECDIR/ctfscope/, not
# in the library directory, and the preload library finds it there by a relative path: the
# installed tree copied to another prefix traces with its own writer (the lazy writer's
# spawn at the first sample, docs/tracing.md "The lazy writer"). Without the writer
# executable, the session makes its writer at its start (forked: not the executable) and
# the trace is whole all the same. Not in sanitizer builds (no preload library).
set(preload_lib ${LIBDIR}/libctfscope-preload.so)
if(NOT EXISTS ${PREFIX}/${preload_lib})
  message(STATUS "no preload library installed (sanitizer build): the tracer is not checked")
  return()
endif()
set(writer_exe ${LIBEXECDIR}/ctfscope/ctfscope-writer)
if(NOT EXISTS ${PREFIX}/${writer_exe})
  message(FATAL_ERROR "not installed: ${PREFIX}/${writer_exe}")
endif()
if(EXISTS ${PREFIX}/${LIBDIR}/ctfscope-writer)
  message(FATAL_ERROR "the writer executable is in the library directory: ${PREFIX}/${LIBDIR}")
endif()
set(moved ${WORK}/moved)
file(COPY ${PREFIX}/ DESTINATION ${moved})
run("cc writer_probe.c" ${CC} -std=gnu11 -Wall -Werror ${SRC}/tests/install/writer_probe.c
    -o ${WORK}/writer_probe)
unset(ENV{LD_LIBRARY_PATH})
# No CTFSCOPE_PRELOAD: the copied ctfscope finds the copied preload library by the library
# directory's path relative to its own (cli_find_module), or the copy's writer would not run.
# The probe: its trace holds its 1 GiB block; `found` is what it printed.
function(record_probe trace)
  run("record writer_probe" ${moved}/bin/ctfscope record -o ${trace} --rate 1e-6 --
      ${WORK}/writer_probe)
  set(found "${run_out}" PARENT_SCOPE)
  run("ctfscope info" ${CTFSCOPE} info ${trace})
  if(NOT run_out MATCHES "Allocations    [1-9]")
    message(FATAL_ERROR "${trace} holds no sampled allocation:\n${run_out}")
  endif()
endfunction()
record_probe(${WORK}/probe.ctf)
file(REAL_PATH ${moved}/${writer_exe} moved_writer)
string(FIND "${found}" "${moved_writer}\n" at)
if(at LESS 0)
  message(FATAL_ERROR "the copied tree's writer (${moved_writer}) did not run; writers seen:\n"
                      "${found}")
endif()
file(REMOVE ${moved}/${writer_exe})
record_probe(${WORK}/probe_eager.ctf)
string(FIND "${found}" "${moved}/" at)
if(NOT at LESS 0)
  message(FATAL_ERROR "a writer executable of the copied tree ran after its removal:\n${found}")
endif()
message(STATUS "the copied tree's tracer ran its own writer executable, and without it a "
               "forked writer")
