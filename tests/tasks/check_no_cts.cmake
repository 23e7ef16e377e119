# SPDX-License-Identifier: MIT
# nm -u on OBJ: with EXPECT=none, fails if any cts symbol is referenced (CTS_TASKS_DISABLE
# must compile every call away); with EXPECT=some, fails if none is (the check would be
# vacuous).
execute_process(COMMAND ${NM} -u ${OBJ} OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nm failed on ${OBJ}")
endif()
string(REGEX MATCHALL "[^ \n]*cts[^ \n]*" refs "${out}")
if(EXPECT STREQUAL "none" AND refs)
  message(FATAL_ERROR "with CTS_TASKS_DISABLE the object still references: ${refs}")
elseif(EXPECT STREQUAL "some" AND NOT refs)
  message(FATAL_ERROR "the enabled object references no cts symbol: the check is vacuous")
endif()
message(STATUS "undefined symbols: ${out}")
