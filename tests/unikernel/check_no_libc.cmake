# SPDX-License-Identifier: MIT
# The unikernel's link is what proves that the core needs no libc (examples/unikernel/
# CMakeLists.txt). This checks that the proof can fail: the kernel's own objects and the
# kernel-built core, linked the same way with one more object that calls puts() and
# malloc(), must fail on exactly those symbols; and the real kernel has no undefined symbol.
string(REPLACE "|" ";" objects "${OBJECTS}")
set(probe ${WORK}/libc_probe.c)
file(MAKE_DIRECTORY ${WORK})
file(WRITE ${probe} "int puts(const char *);\nvoid *malloc(unsigned long);\n"
                    "void libc_probe(void);\nvoid libc_probe(void) { puts(malloc(1)); }\n")
execute_process(COMMAND ${CC} -ffreestanding -fno-pic -nostdlib -static -Wl,-T,${LDSCRIPT}
                        -Wl,--no-warn-rwx-segments -o ${WORK}/probe.elf ${probe} ${objects}
                        ${KSYMS_EMPTY} ${CORE_LIB}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(rc EQUAL 0)
  message(FATAL_ERROR "a kernel calling puts() and malloc() linked: the check proves nothing")
endif()
if(NOT out MATCHES "undefined reference to `puts'" OR NOT out MATCHES "undefined reference to `malloc'")
  message(FATAL_ERROR "the probe failed to link for another reason:\n${out}")
endif()
string(REGEX MATCHALL "undefined reference to `[^']+'" undefined "${out}")
list(REMOVE_DUPLICATES undefined)
list(LENGTH undefined n)
if(NOT n EQUAL 2)
  message(FATAL_ERROR "more than the probe's symbols are undefined: ${undefined}")
endif()
execute_process(COMMAND ${NM} -u ${KERNEL} OUTPUT_VARIABLE out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT out STREQUAL "")
  message(FATAL_ERROR "the kernel has undefined symbols: ${out}")
endif()
message(STATUS "the kernel links no libc: a call to puts() or malloc() fails its link")
