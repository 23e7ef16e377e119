# SPDX-License-Identifier: MIT
# The checked-in .clang-format is applied: every C source and header of the project must be
# left unchanged by clang-format (run `clang-format -i` on the files it names).
file(GLOB_RECURSE sources RELATIVE ${ROOT}
     ${ROOT}/include/*.h ${ROOT}/src/*.c ${ROOT}/src/*.h ${ROOT}/tests/*.c ${ROOT}/tests/*.h
     ${ROOT}/bench/*.c ${ROOT}/bench/*.h ${ROOT}/examples/*.c)
# Generated or third-party-shaped code is left as it is.
list(FILTER sources EXCLUDE REGEX "node_modules/|/corpus/|bench_lttng_tp\\.h$")
set(bad "")
foreach(f IN LISTS sources)
  execute_process(COMMAND ${CLANG_FORMAT} --dry-run --Werror ${ROOT}/${f}
                  RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
  if(NOT rc EQUAL 0)
    list(APPEND bad ${f})
  endif()
endforeach()
list(LENGTH sources n)
if(bad)
  string(REPLACE ";" "\n  " list "${bad}")
  message(FATAL_ERROR "not clang-formatted (clang-format -i them):\n  ${list}")
endif()
message(STATUS "${n} files are clang-formatted")
