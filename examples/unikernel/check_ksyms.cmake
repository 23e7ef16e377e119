# SPDX-License-Identifier: MIT
# The final kernel's functions must sit where the first link put them: the symbol table
# linked into it was made from the first link's addresses.
function(text_symbols elf var)
  execute_process(COMMAND ${NM} -n --defined-only ${elf} OUTPUT_VARIABLE out RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "nm failed on ${elf}")
  endif()
  string(REGEX MATCHALL "[0-9a-f]+ [Tt] [A-Za-z0-9_.]+" syms "${out}")
  set(${var} "${syms}" PARENT_SCOPE)
endfunction()
text_symbols(${FIRST} first)
text_symbols(${FINAL} final)
if(NOT first STREQUAL final)
  file(REMOVE ${FINAL})
  message(FATAL_ERROR "the unikernel's functions moved between its two links")
endif()
