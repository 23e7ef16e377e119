/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE /* splice() */
#include "trace_sink.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <ctfscope/ctfscope.h>

#include "common/check.h"
#include "common/compiler.h"
#include "core/memtrace_wire.h"
#include "core/mprof_wire.h"
#include "os/os.h"

#define HEAD_SIZE     20u /* magic + the 16 bytes that tell memtrace from mirage-profile */
#define MT_HEADER_MAX 68u /* memtrace.md §4: v3 headers, the largest */
#define NAME_PART_MAX 48u

struct cts_sink {
  cts_sink_config_t cfg;
  char tag[NAME_PART_MAX + 1];
  char fixed_name[256];
  cts_sink_format_t format;
  uint8_t head[HEAD_SIZE];
  size_t head_len;
  int fd; /* the temporary file, -1 before the format is known */
  char tmp_name[64];
  cts_mt_reader_t *reader;
  uint64_t received, written, complete, events, packets, allocations;
  uint64_t events_in_packet; /* delivered for the packet being decoded, not yet complete */
  bool has_info, finished;
  /* Memtrace streams checked packet by packet: framing state of the packet being received.
   * The reader sees the first packet only (the trace info); it is freed after it. */
  uint8_t mt_header[MT_HEADER_MAX];
  size_t mt_header_len, cts__mt_header_size;
  uint64_t mt_left, mt_packet_start;
  uint16_t mt_version;
  uint64_t mt_pid;
  int err;
  char msg[320];
  /* What the file name is made of, copied from the trace info. */
  char program[NAME_PART_MAX + 1];
  long long pid;
  uint64_t start_time_us;
  /* Task traces: framing state of the packet being received. */
  uint8_t mp_header[MPROF_HEADER];
  size_t mp_header_len;
  uint64_t mp_left, mp_packet_start;
  char saved_name[256];
};

void cts_sink_config_init(cts_sink_config_t *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->dir_fd = AT_FDCWD;
  cfg->max_packet_size = 1u << 20;
  cfg->validate = CTS_SINK_VALIDATE_FULL;
}

static const char *const validate_names[] = {"packets", "events", "full"};

const char *cts_sink_validate_name(cts_sink_validate_t v) {
  return (unsigned)v < 3 ? validate_names[v] : "?";
}

bool cts_sink_validate_parse(const char *name, cts_sink_validate_t *out) {
  for (unsigned i = 0; i < 3; i++) {
    if (strcmp(name, validate_names[i]) == 0) {
      *out = (cts_sink_validate_t)i;
      return true;
    }
  }
  return false;
}

/* Copies the characters that are safe in a file name, replacing the others by '_', never
 * starting with '.', at most max characters; "" becomes fallback. */
static void sanitise(char *dst, size_t max, const char *src, const char *fallback) {
  size_t n = 0;
  for (const char *p = src ? src : ""; *p && n < max; p++) {
    const char c = *p;
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-' || c == '+' || c == '.';
    dst[n++] = ok ? c : '_';
  }
  dst[n] = '\0';
  if (n == 0) snprintf(dst, max + 1, "%s", fallback);
  if (dst[0] == '.') dst[0] = '_';
}

static int fail(cts_sink_t *s, int err, const char *fmt, ...) CTS_PRINTF(3, 4);
static int fail(cts_sink_t *s, int err, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->msg, sizeof s->msg, fmt, ap);
  va_end(ap);
  s->err = err;
  return err;
}

static int on_info(void *ud, const cts_mt_info_t *info) {
  cts_sink_t *s = ud;
  const char *base = info->executable_name ? strrchr(info->executable_name, '/') : NULL;
  sanitise(s->program, NAME_PART_MAX, base ? base + 1 : info->executable_name, "trace");
  s->pid = (long long)info->pid;
  s->start_time_us = info->start_time_us;
  return 0;
}

static int on_event(void *ud, const cts_mt_event_t *ev) {
  cts_sink_t *s = ud;
  (void)ev;
  s->events_in_packet++;
  return 0;
}

static int on_packet(void *ud, const cts_mt_packet_t *p) {
  cts_sink_t *s = ud;
  if (p->kind == CTS_MT_PACKET_TRUNCATED) return 0;
  if (s->cfg.validate == CTS_SINK_VALIDATE_PACKETS) {
    /* The framer (feed_memtrace_packets) counts packets; the reader only decodes the
     * trace info. */
    if (p->kind == CTS_MT_PACKET_TRACE_INFO) {
      s->has_info = true;
      s->mt_pid = p->pid;
    }
    return 0;
  }
  if (p->kind == CTS_MT_PACKET_EVENTS) s->allocations += p->alloc_id_end - p->alloc_id_begin;
  s->complete = p->offset + p->size;
  s->packets++;
  s->events += s->events_in_packet;
  s->events_in_packet = 0;
  if (p->kind == CTS_MT_PACKET_TRACE_INFO) {
    s->has_info = true;
    s->mt_pid = p->pid;
  }
  return 0;
}

int cts_sink_create(cts_sink_t **out, const cts_sink_config_t *cfg) {
  *out = NULL;
  cts_sink_t *s = calloc(1, sizeof *s);
  if (!s) return -ENOMEM;
  s->cfg = *cfg;
  s->fd = -1;
  sanitise(s->tag, NAME_PART_MAX, cfg->tag, "");
  if (cfg->fixed_name) snprintf(s->fixed_name, sizeof s->fixed_name, "%s", cfg->fixed_name);
  s->cfg.tag = NULL;
  s->cfg.fixed_name = NULL;
  /* Task traces carry no start time in their packets: name them by their arrival. */
  s->start_time_us = (uint64_t)time(NULL) * 1000000u;
  snprintf(s->tmp_name, sizeof s->tmp_name, ".ctfscope-%ld-%llu.part", (long)getpid(),
           (unsigned long long)cfg->serial);
  *out = s;
  return 0;
}

static int start_memtrace(cts_sink_t *s) {
  cts_mt_reader_config_t rc;
  cts_mt_reader_config_init(&rc);
  rc.allocator = cts_os_allocator();
  rc.decode_backtraces = s->cfg.validate == CTS_SINK_VALIDATE_FULL;
  rc.max_packet_size = s->cfg.max_packet_size;
  /* Locations of one program are a few MiB at most; this bounds a hostile peer. */
  rc.max_location_bytes = 64u << 20;
  const cts_mt_handler_t h = {
      .user_data = s, .on_info = on_info, .on_event = on_event, .on_packet = on_packet};
  const int err = cts_mt_reader_create(&s->reader, &rc, &h);
  if (err) return fail(s, err, "cannot create a trace reader: %s", cts_os_strerror(err));
  return 0;
}

/* Task traces are validated packet by packet: magic, uuid, sizes (mprof.md §2.3, §4). */
static int feed_mprof(cts_sink_t *s, const uint8_t *p, size_t len) {
  while (len > 0) {
    if (s->mp_header_len < MPROF_HEADER) {
      size_t take = MPROF_HEADER - s->mp_header_len;
      if (take > len) take = len;
      CTS_ASSERT(s->mp_header_len + take <= sizeof s->mp_header);
      memcpy(s->mp_header + s->mp_header_len, p, take);
      s->mp_header_len += take;
      p += take;
      len -= take;
      if (s->mp_header_len < MPROF_HEADER) return 0;
      const uint8_t *h = s->mp_header;
      const uint64_t at = s->mp_packet_start;
      if (cts_ld_le32(h + MPROF_OFF_MAGIC) != MPROF_MAGIC ||
          memcmp(h + MPROF_OFF_UUID, cts__mprof_uuid, sizeof cts__mprof_uuid) != 0)
        return fail(s, CTS_E_BAD_MAGIC,
                    "at offset %llu: task-trace packet without the mirage-profile magic and uuid",
                    (unsigned long long)at);
      const uint32_t bits = cts_ld_le32(h + MPROF_OFF_PACKET_SIZE);
      const uint32_t content = cts_ld_le32(h + MPROF_OFF_CONTENT_SIZE);
      if (bits % 8 != 0 || bits / 8 < MPROF_HEADER || content > bits || content < MPROF_HEADER * 8)
        return fail(s, CTS_E_PACKET_SIZE,
                    "at offset %llu: task-trace packet of %u bits with %u bits of content is "
                    "impossible",
                    (unsigned long long)at, bits, content);
      if (bits / 8 > s->cfg.max_packet_size)
        return fail(s, CTS_E_PACKET_TOO_LARGE,
                    "at offset %llu: packet of %u bytes exceeds the limit of %u bytes",
                    (unsigned long long)at, bits / 8, s->cfg.max_packet_size);
      s->mp_left = bits / 8 - MPROF_HEADER;
    } else {
      const size_t take = s->mp_left < len ? (size_t)s->mp_left : len;
      s->mp_left -= take;
      p += take;
      len -= take;
    }
    if (s->mp_left == 0) {
      s->mp_packet_start += cts_ld_le32(s->mp_header + MPROF_OFF_PACKET_SIZE) / 8;
      s->complete = s->mp_packet_start;
      s->packets++;
      s->has_info = true;
      s->mp_header_len = 0;
    }
  }
  return 0;
}

/* Checks a complete memtrace packet header (memtrace.md §4) as the OCaml reader does, and
 * more: the size must fit the limit, the version must be the trace's. */
static int check_memtrace_header(cts_sink_t *s) {
  cts__mt_header_t h;
  cts__mt_parse_header(s->mt_header, &h);
  const unsigned long long at = (unsigned long long)s->mt_packet_start;
  if (h.magic != MT_MAGIC)
    return fail(s, CTS_E_BAD_MAGIC, "at offset %llu: bad packet magic 0x%08x", at, h.magic);
  const uint32_t bits = h.size_bits;
  if (bits % 8 != 0 || bits / 8 < s->cts__mt_header_size)
    return fail(s, CTS_E_PACKET_SIZE,
                "at offset %llu: packet of %u bits is not whole bytes or is below its %zu-byte "
                "header",
                at, bits, s->cts__mt_header_size);
  if (bits / 8 > s->cfg.max_packet_size)
    return fail(s, CTS_E_PACKET_TOO_LARGE,
                "at offset %llu: packet of %u bytes exceeds the reader's limit of %u bytes", at,
                bits / 8, s->cfg.max_packet_size);
  if (h.version != s->mt_version)
    return fail(s, CTS_E_VERSION_MISMATCH, "at offset %llu: packet version %u, the trace's is %u",
                at, h.version, s->mt_version);
  if (h.time_end < h.time_begin)
    return fail(s, CTS_E_PACKET_TIMES,
                "at offset %llu: packet ends (%llu us) before it begins "
                "(%llu us)",
                at, (unsigned long long)h.time_end, (unsigned long long)h.time_begin);
  const uint64_t id_begin = h.alloc_id_begin, id_end = h.alloc_id_end;
  if (id_end < id_begin)
    return fail(s, CTS_E_PACKET_IDS, "at offset %llu: object ids %llu to %llu run backwards", at,
                (unsigned long long)id_begin, (unsigned long long)id_end);
  /* Packets of another process are skipped by readers (memtrace.md §11); they hold no allocations
   * of this trace. Before the trace info is decoded mt_pid is unknown, but the first packet has no
   * allocations anyway. */
  if (s->has_info && h.pid == s->mt_pid) s->allocations += id_end - id_begin;
  s->mt_left = bits / 8 - s->cts__mt_header_size;
  return 0;
}

/* Memtrace streams checked packet by packet: headers are checked as they complete, contents
 * are passed over. The len bytes are the stream's bytes from offset at; they come from p, or,
 * when p is NULL, they are already in the file (cts_sink_feed_pipe) and the few header bytes
 * are read back from it. */
static int feed_memtrace_packets(cts_sink_t *s, const uint8_t *p, uint64_t at, size_t len) {
  while (len > 0) {
    size_t take;
    if (s->cts__mt_header_size == 0 || s->mt_header_len < s->cts__mt_header_size) {
      const size_t want = s->cts__mt_header_size ? s->cts__mt_header_size : MT_MIN_PREFIX;
      take = want - s->mt_header_len;
      if (take > len) take = len;
      CTS_ASSERT(want <= sizeof s->mt_header && s->mt_header_len + take <= want);
      if (p) {
        memcpy(s->mt_header + s->mt_header_len, p, take);
      } else {
        const ssize_t got = pread(s->fd, s->mt_header + s->mt_header_len, take, (off_t)at);
        if (got != (ssize_t)take) {
          const int err = got < 0 ? -errno : -EIO;
          return fail(s, err, "cannot read back the trace file: %s", cts_os_strerror(err));
        }
      }
      s->mt_header_len += take;
      if (s->mt_header_len == want) {
        if (s->cts__mt_header_size == 0) {
          /* The first header sets the version of the whole trace. */
          if (s->mt_version == 0) {
            s->mt_version = cts_ld_le16(s->mt_header + MT_VERSION_OFFSET);
            if (s->mt_version < 1 || s->mt_version > 3)
              return fail(s, CTS_E_BAD_VERSION,
                          "at offset %llu: trace format v%03u is not supported (v001 to v003 "
                          "are)",
                          (unsigned long long)s->mt_packet_start, s->mt_version);
          }
          s->cts__mt_header_size = cts__mt_header_size(s->mt_version);
        } else {
          const int err = check_memtrace_header(s);
          if (err) return err;
        }
      }
    } else {
      take = s->mt_left < len ? (size_t)s->mt_left : len;
      s->mt_left -= take;
    }
    if (p) p += take;
    at += take;
    len -= take;
    if (s->cts__mt_header_size && s->mt_header_len == s->cts__mt_header_size && s->mt_left == 0) {
      s->mt_packet_start += cts_ld_le32(s->mt_header + 4) / 8;
      s->mt_header_len = 0;
      s->cts__mt_header_size = 0;
      if (s->reader) {
        /* The end of the first packet: the reader has decoded the trace info, or failed. */
        cts_mt_reader_destroy(s->reader);
        s->reader = NULL;
        if (!s->has_info)
          return fail(s, CTS_E_BAD_TRACE_INFO,
                      "at offset 0: the first packet is not a trace-info packet");
      }
      s->complete = s->mt_packet_start;
      s->packets++;
    }
  }
  return 0;
}

/* Writes the bytes through to the file, then validates them. */
static int take_bytes(cts_sink_t *s, const uint8_t *p, size_t len) {
  int err = cts_os_fd_write((void *)(intptr_t)s->fd, p, len);
  if (err) return fail(s, err, "cannot write the trace file: %s", cts_os_strerror(err));
  s->written += len;
  s->received += len;
  if (s->format == CTS_SINK_FORMAT_MPROF) return feed_mprof(s, p, len);
  if (s->cfg.validate == CTS_SINK_VALIDATE_PACKETS) {
    /* The reader decodes the trace info: it sees the first packet's bytes, and no more (a
     * later packet is the framer's to judge); the framer frees it at that packet's end. */
    uint64_t at = s->received - len;
    while (len > 0 && s->reader) {
      size_t n;
      if (s->cts__mt_header_size && s->mt_header_len == s->cts__mt_header_size)
        n = s->mt_left; /* the rest of the first packet's content */
      else
        n = (s->cts__mt_header_size ? s->cts__mt_header_size : MT_MIN_PREFIX) - s->mt_header_len;
      if (n > len) n = len;
      err = cts_mt_reader_feed(s->reader, p, n);
      if (err) return fail(s, err, "%s", cts_mt_reader_error_message(s->reader));
      err = feed_memtrace_packets(s, p, at, n);
      if (err) return err;
      p += n;
      at += n;
      len -= n;
    }
    return feed_memtrace_packets(s, p, at, len);
  }
  err = cts_mt_reader_feed(s->reader, p, len);
  if (err) return fail(s, err, "%s", cts_mt_reader_error_message(s->reader));
  return 0;
}

static int detect(cts_sink_t *s) {
  if (memcmp(s->head + 4, cts__mprof_uuid, sizeof cts__mprof_uuid) == 0) {
    s->format = CTS_SINK_FORMAT_MPROF;
  } else {
    s->format = CTS_SINK_FORMAT_MEMTRACE;
    const int err = start_memtrace(s);
    if (err) return err;
  }
  s->fd =
      openat(s->cfg.dir_fd, s->tmp_name, O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (s->fd < 0) {
    const int err = -errno;
    return fail(s, err, "cannot create the file '%s': %s", s->tmp_name, cts_os_strerror(err));
  }
  return take_bytes(s, s->head, s->head_len);
}

int cts_sink_feed(cts_sink_t *s, const void *data, size_t len) {
  if (s->err) return s->err;
  if (s->finished) return fail(s, CTS_E_STATE, "the sink is finished");
  const uint8_t *p = data;
  if (s->format == CTS_SINK_FORMAT_UNKNOWN) {
    size_t take = HEAD_SIZE - s->head_len;
    if (take > len) take = len;
    CTS_ASSERT(s->head_len + take <= sizeof s->head);
    memcpy(s->head + s->head_len, p, take);
    s->head_len += take;
    p += take;
    len -= take;
    const size_t check = s->head_len < 4 ? s->head_len : 4;
    static const uint8_t magic_bytes[4] = {0xc1, 0x1f, 0xfc, 0xc1}; /* MT_MAGIC, stored LE */
    if (memcmp(s->head, magic_bytes, check) != 0) {
      s->received = s->head_len;
      char shown[3 * 4 + 1] = "";
      size_t used = 0;
      for (size_t i = 0; i < check; i++)
        used +=
            (size_t)snprintf(shown + used, sizeof shown - used, "%s%02x", i ? " " : "", s->head[i]);
      return fail(s, CTS_E_BAD_MAGIC,
                  "at offset 0: unknown stream format: starts with %s, not a trace packet magic "
                  "(c1 1f fc c1)",
                  shown);
    }
    if (s->head_len < HEAD_SIZE) {
      s->received = s->head_len;
      return 0;
    }
    s->received = 0;
    const int err = detect(s);
    if (err) return err;
  }
  return len ? take_bytes(s, p, len) : 0;
}

bool cts_sink_can_take_pipe(const cts_sink_t *s) {
  return s->format == CTS_SINK_FORMAT_MEMTRACE && s->cfg.validate == CTS_SINK_VALIDATE_PACKETS &&
         !s->reader && !s->err && !s->finished;
}

int cts_sink_feed_pipe(cts_sink_t *s, int pipe_rd, size_t len) {
  if (s->err) return s->err;
  if (!cts_sink_can_take_pipe(s)) return fail(s, CTS_E_STATE, "the sink cannot take a pipe now");
  const uint64_t at = s->written;
  size_t left = len;
  while (left > 0) {
    loff_t off = (loff_t)(at + (len - left));
    const ssize_t n = splice(pipe_rd, NULL, s->fd, &off, left, SPLICE_F_MOVE);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? -errno : -EIO;
      return fail(s, err, "cannot write the trace file: %s", cts_os_strerror(err));
    }
    left -= (size_t)n;
  }
  s->written += len;
  s->received += len;
  return feed_memtrace_packets(s, NULL, at, len);
}

/* Moves the temporary file to name without replacing anything: hard links fail with EEXIST
 * atomically; file systems without them fall back to a checked rename. */
static int place_unique(cts_sink_t *s, const char *name) {
  if (linkat(s->cfg.dir_fd, s->tmp_name, s->cfg.dir_fd, name, 0) == 0) {
    unlinkat(s->cfg.dir_fd, s->tmp_name, 0);
    return 0;
  }
  if (errno == EEXIST) return -EEXIST;
  if (errno != EPERM && errno != EOPNOTSUPP && errno != ENOTSUP && errno != EMLINK) return -errno;
  struct stat st;
  if (fstatat(s->cfg.dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) return -EEXIST;
  if (renameat(s->cfg.dir_fd, s->tmp_name, s->cfg.dir_fd, name) != 0) return -errno;
  return 0;
}

static void base_name(const cts_sink_t *s, char *buf, size_t size) {
  char when[32];
  const time_t secs = (time_t)(s->start_time_us / 1000000u);
  struct tm tm;
  if (s->start_time_us / 1000000u < 253402300800u && gmtime_r(&secs, &tm))
    strftime(when, sizeof when, "%Y%m%dT%H%M%SZ", &tm);
  else
    snprintf(when, sizeof when, "%llu", (unsigned long long)s->start_time_us);
  if (s->format == CTS_SINK_FORMAT_MPROF)
    snprintf(buf, size, "tasks.%s%s%s", when, s->tag[0] ? "." : "", s->tag);
  else
    snprintf(buf, size, "%s.%lld.%s%s%s", s->program, s->pid, when, s->tag[0] ? "." : "", s->tag);
}

int cts_sink_finish(cts_sink_t *s, const char **saved_name) {
  *saved_name = NULL;
  if (s->finished) return CTS_E_STATE;
  s->finished = true;
  if (s->fd < 0) return 0;
  int err = 0;
  if (!s->has_info) goto remove;
  if (s->written > s->complete && ftruncate(s->fd, (off_t)s->complete) != 0) {
    err = -errno;
    goto remove;
  }
  const int fd = s->fd;
  s->fd = -1;
  if (close(fd) != 0) {
    err = -errno;
    goto remove_closed;
  }
  if (s->fixed_name[0]) {
    if (renameat(s->cfg.dir_fd, s->tmp_name, s->cfg.dir_fd, s->fixed_name) != 0) {
      err = -errno;
      goto remove_closed;
    }
    snprintf(s->saved_name, sizeof s->saved_name, "%s", s->fixed_name);
    *saved_name = s->saved_name;
    return 0;
  }
  char base[200];
  base_name(s, base, sizeof base);
  for (unsigned i = 1; i < 10000; i++) {
    if (i == 1)
      snprintf(s->saved_name, sizeof s->saved_name, "%s.ctf", base);
    else
      snprintf(s->saved_name, sizeof s->saved_name, "%s-%u.ctf", base, i);
    err = place_unique(s, s->saved_name);
    if (err != -EEXIST) break;
  }
  if (err) goto remove_closed;
  *saved_name = s->saved_name;
  return 0;
remove:
  close(s->fd);
  s->fd = -1;
remove_closed:
  unlinkat(s->cfg.dir_fd, s->tmp_name, 0);
  s->saved_name[0] = '\0';
  return err;
}

void cts_sink_destroy(cts_sink_t *s) {
  if (!s) return;
  if (s->fd >= 0) {
    close(s->fd);
    unlinkat(s->cfg.dir_fd, s->tmp_name, 0);
  }
  cts_mt_reader_destroy(s->reader);
  free(s);
}

cts_sink_format_t cts_sink_format(const cts_sink_t *s) {
  return s->format;
}
uint64_t cts_sink_received(const cts_sink_t *s) {
  return s->received;
}
uint64_t cts_sink_complete_bytes(const cts_sink_t *s) {
  return s->has_info ? s->complete : 0;
}
uint64_t cts_sink_events(const cts_sink_t *s) {
  return s->events;
}
uint64_t cts_sink_allocations(const cts_sink_t *s) {
  return s->allocations;
}
const char *cts_sink_count(const cts_sink_t *s, uint64_t *n) {
  if (s->format == CTS_SINK_FORMAT_MEMTRACE && s->cfg.validate == CTS_SINK_VALIDATE_PACKETS) {
    *n = s->allocations;
    return "allocations";
  }
  *n = s->events;
  return "events";
}
uint64_t cts_sink_packets(const cts_sink_t *s) {
  return s->packets;
}
bool cts_sink_has_info(const cts_sink_t *s) {
  return s->has_info;
}
int cts_sink_error(const cts_sink_t *s) {
  return s->err;
}
const char *cts_sink_message(const cts_sink_t *s) {
  return s->msg;
}
