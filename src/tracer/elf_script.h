/* SPDX-License-Identifier: MIT */
/* Whether a script (a file that starts with "#!") runs under an interpreter of another kind
 * than the preload library (tracer/elf_kind.h): the kernel execs the interpreter, whose
 * loader, finding this library in LD_PRELOAD, prints "ERROR: ld.so: object ... cannot be
 * preloaded (wrong ELF class: ELFCLASS64): ignored." on the script's standard error, as it
 * would for the program itself. Asked by tracer/elf_runtime.h's cts__elf_examine (the exec
 * hooks and `ctfscope record`) of a file's head. Plain function: no allocation, 3 system
 * calls per interpreter looked at (only for a script), about 600 bytes of stack; errno may
 * change. */
#ifndef CTS_TRACER_ELF_SCRIPT_H
#define CTS_TRACER_ELF_SCRIPT_H

#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "elf_kind.h"

/* The kernel reads a script's first 256 bytes (BINPRM_BUF_SIZE) for its "#!" line, and
 * follows an interpreter that is itself a script a few times (5 in all, then ELOOP). */
#define CTS__SCRIPT_HEAD  256
#define CTS__SCRIPT_DEPTH 4

/* The interpreter named by the "#!" line in head[0..n) into path (size bytes): false when
 * head is no script or the name does not fit. As the kernel reads it: blanks after "#!",
 * the name up to a blank or the line's end. */
static inline bool cts__script_interpreter(const unsigned char *head, size_t n, char *path,
                                           size_t size) {
  const bool cut = n >= CTS__SCRIPT_HEAD; /* the file goes on past what the kernel reads */
  if (cut) n = CTS__SCRIPT_HEAD;
  if (n < 3 || head[0] != '#' || head[1] != '!') return false;
  size_t i = 2;
  while (i < n && (head[i] == ' ' || head[i] == '\t')) i++;
  size_t len = 0;
  while (i + len < n && head[i + len] != ' ' && head[i + len] != '\t' && head[i + len] != '\n' &&
         head[i + len] != '\0')
    len++;
  /* A name that reaches the end of a cut head may go on past it: the kernel refuses it. */
  if (len == 0 || len >= size || (cut && i + len == n)) return false;
  memcpy(path, head + i, len);
  path[len] = '\0';
  return true;
}

/* Whether the script whose first n bytes are head runs, through its chain of interpreters,
 * under a program of another kind (cts__elf_head_of_another_kind). False for no script, or
 * an interpreter that cannot be read (the exec will say why). */
static inline bool cts__script_of_another_kind(const unsigned char *head, size_t n) {
  char path[CTS__SCRIPT_HEAD];
  if (!cts__script_interpreter(head, n, path, sizeof path)) return false;
  for (int depth = 0; depth < CTS__SCRIPT_DEPTH; depth++) {
    const int fd =
        (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) return false;
    unsigned char interpreter_head[CTS__SCRIPT_HEAD];
    const ssize_t got = pread(fd, interpreter_head, sizeof interpreter_head, 0);
    syscall(SYS_close, fd); /* not close(): the preload's is interposed */
    if (got <= 0) return false;
    if (cts__elf_head_of_another_kind(interpreter_head, (size_t)got)) return true;
    if (!cts__script_interpreter(interpreter_head, (size_t)got, path, sizeof path)) return false;
  }
  return false;
}

#endif /* CTS_TRACER_ELF_SCRIPT_H */
