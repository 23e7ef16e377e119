/* SPDX-License-Identifier: MIT */
/**
 * @file errors.h
 * ctfscope error codes.
 *
 * Every fallible ctfscope function returns an `int`: 0 on success or a negative
 * error code. Failed system calls return `-errno` (e.g. `-ENOENT`); ctfscope's own
 * conditions use the pinned range below, from -1000 downwards. Numbers never change
 * once released; new codes are only appended.
 *
 * Trace-reading errors are specific: a corrupt trace names exactly what is wrong
 * (bad magic, MTF index on an empty slot, …) so that tools and tests can tell one
 * defect from another. The offset and a human message are available from the
 * object that failed (e.g. cts_mt_reader_error_message()).
 */
#ifndef CTFSCOPE_ERRORS_H
#define CTFSCOPE_ERRORS_H

#include "common.h" /* CTS_API */

#ifdef __cplusplus
extern "C" {
#endif

/* XX(name, value, short description) — the one table every error string comes from. */
#define CTS_ERROR_MAP(XX)                                                                     \
  XX(AGAIN, -1000, "more input is needed")                                                    \
  XX(INVAL, -1001, "invalid argument")                                                        \
  XX(NOMEM, -1002, "out of memory")                                                           \
  XX(LIMIT, -1003, "a configured resource limit was reached")                                 \
  XX(IO, -1004, "input/output error")                                                         \
  XX(STATE, -1005, "operation not valid in this state")                                       \
  XX(STOPPED, -1006, "stopped by the caller")                                                 \
  XX(EMPTY, -1007, "empty trace: no trace-info packet")                                       \
  XX(TRUNCATED_HEADER, -1008, "trace ends inside a packet header")                            \
  XX(TRUNCATED_PACKET, -1009, "trace ends inside a packet")                                   \
  XX(BAD_MAGIC, -1010, "bad packet magic")                                                    \
  XX(BAD_VERSION, -1011, "unsupported trace format version")                                  \
  XX(VERSION_MISMATCH, -1012, "packet version differs from the trace's")                      \
  XX(PACKET_SIZE, -1013, "packet size is not a whole number of bytes or is below the header") \
  XX(PACKET_TOO_LARGE, -1014, "packet larger than the reader's limit")                        \
  XX(PACKET_TIMES, -1015, "packet ends before it begins")                                     \
  XX(PACKET_IDS, -1016, "packet's object-id range is reversed")                               \
  XX(BAD_TRACE_INFO, -1017, "malformed trace-info packet")                                    \
  XX(DUPLICATE_TRACE_INFO, -1018, "a second trace-info event")                                \
  XX(UNKNOWN_EVENT, -1019, "unknown event code")                                              \
  XX(EVENT_OVERRUN, -1020, "event runs past the end of its packet")                           \
  XX(UNTERMINATED_STRING, -1021, "string without a terminating NUL")                          \
  XX(EVENT_TIME, -1022, "event time outside its packet's time range")                         \
  XX(TIME_NOT_MONOTONE, -1023, "event time goes backwards")                                   \
  XX(BAD_SOURCE, -1024, "allocation source is not minor, major or external")                  \
  XX(BAD_LENGTH, -1025, "negative allocation length or sample count")                         \
  XX(BAD_OBJECT, -1026, "promote or collect refers to an object never allocated")             \
  XX(ALLOC_ID_SYNC, -1027, "packet's allocation count disagrees with its header")             \
  XX(MTF_INDEX, -1028, "name table index refers to an empty slot")                            \
  XX(LOCATION_CODE_ZERO, -1029, "location code 0 used in a backtrace")                        \
  XX(LOCATION_UNDEFINED, -1030, "backtrace uses a location code never defined")               \
  XX(LOCATION_CONFLICT, -1031, "location code redefined differently")                         \
  XX(CACHE_INDEX, -1032, "backtrace-cache index out of range")                                \
  XX(CACHE_VERIFY, -1033, "backtrace-cache verification failed")                              \
  XX(BACKTRACE_TOO_LONG, -1034, "backtrace longer than possible")                             \
  XX(TOO_MANY_DOMAINS, -1035, "more domains than the reader's limit")                         \
  XX(BAD_SAMPLE_RATE, -1036, "sample rate is not in (0, 1]")                                  \
  XX(WRONG_PID, -1037, "packet from another process")                                         \
  XX(SKIPPED_PACKET, -1038, "packet out of sequence, skipped")                                \
  XX(CLOSED, -1039, "the writer is closed")                                                   \
  XX(BAD_COMPRESSION, -1040, "corrupt or truncated compressed stream")                        \
  XX(NOT_A_TRACE, -1041, "the file holds something else than a trace: not overwritten")

/** Error codes; see CTS_ERROR_MAP for their meanings. */
typedef enum cts_error {
#define CTS__ERROR_ENUM(name, value, text) CTS_E_##name = (value),
  CTS_ERROR_MAP(CTS__ERROR_ENUM)
#undef CTS__ERROR_ENUM
} cts_error_t;

/**
 * A short English description of @p err (a ctfscope code or a negative errno).
 * Always returns a valid static string; never NULL. Freestanding: for negative errno
 * values the core returns a generic text; the OS layer's cts_os_strerror() is richer.
 */
CTS_API const char *cts_strerror(int err);

/** The symbolic name of @p err, e.g. "CTS_E_BAD_MAGIC"; "CTS_E_SYSTEM" for errno values. */
CTS_API const char *cts_err_name(int err);

#ifdef __cplusplus
}
#endif
#endif /* CTFSCOPE_ERRORS_H */
