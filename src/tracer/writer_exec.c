/* SPDX-License-Identifier: MIT */
/* ctfscope-writer: the writer process of a lazy session (writer_process.c, "The lazy
 * writer"), exec'd by the traced program at its first sample. It takes the session over
 * from the program's shared mapping (its memfd, address and size in argv) and runs the
 * writer loop until the program stops the session or is gone. Not meant to be run by
 * hand: without the program's mapping it exits with status 127. */
#include "tracer_internal.h"

int main(int argc, char **argv) {
  return cts__writer_exec_main(argc, argv);
}
