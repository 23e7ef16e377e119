/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "common/endian.h"
#include "core/memtrace_wire.h"
#include "mtcols.h"
#include "os.h"

#define CHUNK       (1u << 20)
#define GZ_IN_CHUNK (256u << 10)
/* How often cts_os_read_memtrace() reports progress, in bytes of the file (os.h). */
#define PROGRESS_EVERY (4u << 20)

struct cts_os_input {
  int fd;
  bool owns_fd;
  bool gzip;
  bool gz_done;
  /* zstd: frames one after the other (as zstd(1) reads them); `zs_in` holds what was read
   * and not yet decoded. A frame cut off at the end of the file ends the input at its last
   * complete block, with `tail_lost` set. */
  bool zstd, zs_done, tail_lost;
  ZSTD_DCtx *zs;
  ZSTD_inBuffer zs_in;
  size_t zs_frame_left; /* ZSTD_decompressStream's hint: 0 = between frames */
  uint64_t file_size, file_pos;
  z_stream z;
  uint8_t *zbuf;
  /* The column transform inside the zstd frames (docs/formats/memtrace-zstd.md): the
   * decompressed stream is groups, `grp` the one being read (`grp_len` bytes so far),
   * `raw` the memtrace bytes rebuilt from the last one, handed out from `raw_pos`. */
  bool cols, cols_done;
  int cols_err; /* sticky: the first corrupt group's error */
  cts_mtcols_dec_t *cdec;
  uint8_t *grp, *raw;
  size_t grp_len, grp_cap, raw_len, raw_pos;
  uint64_t grp_offset; /* decompressed offset of the group being read */
  char cols_msg[256];  /* what went wrong, with the offsets */
  /* Bytes read while sniffing the format, handed out before anything else. */
  uint8_t peek[4];
  size_t npeek;
};

static ssize_t raw_read(cts_os_input_t *in, void *buf, size_t len) {
  for (;;) {
    const ssize_t n = read(in->fd, buf, len);
    if (n >= 0) {
      in->file_pos += (uint64_t)n;
      return n;
    }
    if (errno != EINTR) return -errno;
  }
}

/* A zstd stream whose first `n` bytes, `pre`, were read already. */
static int zs_setup(cts_os_input_t *in, const uint8_t *pre, size_t n) {
  in->zbuf = malloc(ZSTD_DStreamInSize());
  in->zs = ZSTD_createDCtx();
  if (!in->zbuf || !in->zs) return -ENOMEM;
  in->zstd = true;
  memcpy(in->zbuf, pre, n);
  in->zs_in = (ZSTD_inBuffer){in->zbuf, n, 0};
  in->zs_frame_left = 1;
  in->npeek = 0;
  return 0;
}

/* A file that opens with a skippable frame: ours (the column transform) if its content
 * says so; another one is zstd's business (it skips it). */
static int cols_setup(cts_os_input_t *in) {
  uint8_t head[CTS_MTCOLS_HEAD_SIZE];
  memcpy(head, in->peek, 4);
  size_t got = 4;
  while (got < sizeof head) {
    const ssize_t n = raw_read(in, head + got, sizeof head - got);
    if (n < 0) return (int)n;
    if (n == 0) break;
    got += (size_t)n;
  }
  const int kind = got == sizeof head ? cts_mtcols_head_check(head) : 0;
  if (kind < 0) return CTS_E_BAD_VERSION; /* a later version of the transform */
  int e = zs_setup(in, head, got);
  if (e || kind == 0) return e;
  in->zs_in.pos = got; /* the frame is read: zstd starts after it */
  in->cols = true;
  in->cdec = calloc(1, cts_mtcols_dec_size());
  in->raw = malloc(CTS_MTCOLS_GROUP_RAW_MAX + CTS_MTCOLS_SLACK);
  in->grp_cap = 1u << 20;
  in->grp = malloc(in->grp_cap);
  if (!in->cdec || !in->raw || !in->grp) return -ENOMEM;
  cts_mtcols_dec_init(in->cdec);
  return 0;
}

int cts_os_input_open(cts_os_input_t **out, const char *path) {
  cts_os_input_t *in = calloc(1, sizeof *in);
  if (!in) return -ENOMEM;
  if (strcmp(path, "-") == 0) {
    in->fd = STDIN_FILENO;
  } else {
    in->fd = cts_os_open_input(path);
    if (in->fd < 0) {
      const int e = in->fd;
      free(in);
      return e;
    }
    in->owns_fd = true;
  }
  struct stat st;
  if (fstat(in->fd, &st) == 0) {
    if (S_ISDIR(st.st_mode)) {
      cts_os_input_close(in);
      return -EISDIR;
    }
    if (S_ISREG(st.st_mode)) in->file_size = (uint64_t)st.st_size;
  }
  if (in->file_size >= CHUNK) posix_fadvise(in->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  /* Sniff the gzip magic (1f 8b) and zstd's (28 b5 2f fd): a memtrace trace starts with
   * c1 1f fc c1 instead. */
  while (in->npeek < 4) {
    const ssize_t n = raw_read(in, in->peek + in->npeek, 4 - in->npeek);
    if (n < 0) {
      cts_os_input_close(in);
      return (int)n;
    }
    if (n == 0) break;
    in->npeek += (size_t)n;
  }
  if (in->npeek >= 2 && in->peek[0] == 0x1f && in->peek[1] == 0x8b) {
    in->gzip = true;
    in->zbuf = malloc(GZ_IN_CHUNK);
    if (!in->zbuf || inflateInit2(&in->z, 15 + 32) != Z_OK) {
      free(in->zbuf);
      in->zbuf = NULL;
      in->gzip = false;
      cts_os_input_close(in);
      return -ENOMEM;
    }
    memcpy(in->zbuf, in->peek, in->npeek);
    in->z.next_in = in->zbuf;
    in->z.avail_in = (uInt)in->npeek;
    in->npeek = 0;
  } else if (in->npeek == 4 && in->peek[0] == 0x28 && in->peek[1] == 0xb5 && in->peek[2] == 0x2f &&
             in->peek[3] == 0xfd) {
    const int e = zs_setup(in, in->peek, 4);
    if (e) {
      cts_os_input_close(in);
      return e;
    }
  } else if (in->npeek == 4 && cts_ld_le32(in->peek) == CTS_MTCOLS_SKIP_MAGIC) {
    const int e = cols_setup(in);
    if (e) {
      cts_os_input_close(in);
      return e;
    }
  }
  *out = in;
  return 0;
}

static ssize_t gz_read(cts_os_input_t *in, void *buf, size_t len) {
  if (in->gz_done) return 0;
  in->z.next_out = buf;
  in->z.avail_out = (uInt)(len > UINT32_MAX ? UINT32_MAX : len);
  while (in->z.avail_out > 0) {
    if (in->z.avail_in == 0) {
      const ssize_t n = raw_read(in, in->zbuf, GZ_IN_CHUNK);
      if (n < 0) return n;
      if (n == 0) {
        /* End of file: a gzip stream that stops early is a truncated file. */
        if (in->z.next_out == buf) return CTS_E_BAD_COMPRESSION;
        break;
      }
      in->z.next_in = in->zbuf;
      in->z.avail_in = (uInt)n;
    }
    const int rc = inflate(&in->z, Z_NO_FLUSH);
    if (rc == Z_STREAM_END) {
      /* Concatenated gzip members are one stream, as gzip(1) treats them. */
      if (in->z.avail_in == 0) {
        const ssize_t n = raw_read(in, in->zbuf, GZ_IN_CHUNK);
        if (n < 0) return n;
        if (n == 0) {
          in->gz_done = true;
          break;
        }
        in->z.next_in = in->zbuf;
        in->z.avail_in = (uInt)n;
      }
      inflateReset(&in->z);
    } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
      return CTS_E_BAD_COMPRESSION; /* bad input, not a failed read (exit 1, not 3) */
    }
  }
  return (ssize_t)((uint8_t *)in->z.next_out - (uint8_t *)buf);
}

/* Tops up the undecoded input; false at the end of the file. */
static ssize_t zs_fill(cts_os_input_t *in) {
  const ssize_t n = raw_read(in, in->zbuf, ZSTD_DStreamInSize());
  if (n > 0) in->zs_in = (ZSTD_inBuffer){in->zbuf, (size_t)n, 0};
  return n;
}

static ssize_t zs_read(cts_os_input_t *in, void *buf, size_t len) {
  ZSTD_outBuffer out = {buf, len, 0};
  while (!in->zs_done && out.pos < out.size) {
    bool eof = false;
    if (in->zs_in.pos == in->zs_in.size) {
      const ssize_t n = zs_fill(in);
      if (n < 0) return n;
      eof = n == 0;
    }
    const size_t before = out.pos, taken = in->zs_in.pos;
    const size_t rc = ZSTD_decompressStream(in->zs, &out, &in->zs_in);
    if (ZSTD_isError(rc)) /* corrupt data: bad input (exit 1), not a failed read */
      return out.pos ? (ssize_t)out.pos : CTS_E_BAD_COMPRESSION;
    if (out.pos != before || in->zs_in.pos != taken) {
      in->zs_frame_left = rc; /* 0: the input ended a frame */
    } else if (eof) {
      /* The end of the file, and the decoder has nothing more to give from what it took:
       * between frames it is the end of the stream; inside one, the blocks decoded so
       * far are all there is. */
      in->zs_done = true;
      in->tail_lost = in->zs_frame_left != 0;
    }
  }
  return (ssize_t)out.pos;
}

/* Fills `grp` up to `want` bytes from the zstd stream: 1 when there, 0 at its end, or an
 * error. */
static int cols_fill(cts_os_input_t *in, size_t want) {
  while (in->grp_len < want) {
    const ssize_t n = zs_read(in, in->grp + in->grp_len, want - in->grp_len);
    if (n < 0) return (int)n;
    if (n == 0) return 0;
    in->grp_len += (size_t)n;
  }
  return 1;
}

/* Reads and decodes the next group into `raw`: 1 done, 0 at the end of the stream (a group
 * cut short is dropped, with tail_lost and the message set), or an error (the message set). */
static int cols_next_group(cts_os_input_t *in) {
  in->grp_len = 0;
  int r = cols_fill(in, CTS_MTCOLS_GROUP_HEAD);
  size_t total = 0, raw_size = 0;
  const char *why = NULL;
  if (r == 1) {
    const int e = cts_mtcols_group_size(in->grp, &total, &raw_size, &why);
    if (e) {
      snprintf(in->cols_msg, sizeof in->cols_msg,
               "corrupt column group at byte %llu of the decompressed stream (file read up to "
               "byte %llu): %s",
               (unsigned long long)in->grp_offset, (unsigned long long)in->file_pos, why);
      return e;
    }
    if (total > in->grp_cap) {
      uint8_t *const g = realloc(in->grp, total);
      if (!g) return -ENOMEM;
      in->grp = g;
      in->grp_cap = total;
    }
    r = cols_fill(in, total);
  }
  if (r < 0) return r;
  if (r == 0) {
    /* Cut inside a zstd frame (zs_read says so) or inside a group. */
    if (in->grp_len || in->tail_lost) {
      in->tail_lost = true;
      snprintf(in->cols_msg, sizeof in->cols_msg,
               "the compressed trace is cut short at file byte %llu: its column groups up to "
               "byte %llu of the decompressed stream are kept, the rest is lost",
               (unsigned long long)in->file_pos, (unsigned long long)in->grp_offset);
    }
    return 0;
  }
  size_t at = 0;
  const int e = cts_mtcols_dec_group(in->cdec, in->grp, total, in->raw, &why, &at);
  if (e) {
    snprintf(in->cols_msg, sizeof in->cols_msg,
             "corrupt column group at byte %llu of the decompressed stream (file read up to "
             "byte %llu), memtrace byte %llu of the group: %s",
             (unsigned long long)in->grp_offset, (unsigned long long)in->file_pos,
             (unsigned long long)at, why);
    return e;
  }
  in->grp_offset += total;
  in->raw_len = raw_size;
  in->raw_pos = 0;
  return 1;
}

static ssize_t cols_read(cts_os_input_t *in, uint8_t *buf, size_t len) {
  size_t done = 0;
  while (done < len && !in->cols_err) {
    if (in->raw_pos < in->raw_len) {
      const size_t n =
          in->raw_len - in->raw_pos < len - done ? in->raw_len - in->raw_pos : len - done;
      memcpy(buf + done, in->raw + in->raw_pos, n);
      in->raw_pos += n;
      done += n;
      continue;
    }
    if (in->cols_done) break;
    const int r = cols_next_group(in);
    if (r == 0) in->cols_done = true;
    if (r < 0) in->cols_err = r;
  }
  /* An error after good bytes: those first, the error at the next call. */
  return done || !in->cols_err ? (ssize_t)done : in->cols_err;
}

ssize_t cts_os_input_read(cts_os_input_t *in, void *buf, size_t len) {
  if (len == 0) return 0;
  if (in->gzip) return gz_read(in, buf, len);
  if (in->cols) return cols_read(in, buf, len);
  if (in->zstd) return zs_read(in, buf, len);
  if (in->npeek) {
    const size_t n = in->npeek < len ? in->npeek : len;
    memcpy(buf, in->peek, n);
    memmove(in->peek, in->peek + n, in->npeek - n);
    in->npeek -= n;
    return (ssize_t)n;
  }
  return raw_read(in, buf, len);
}

uint64_t cts_os_input_file_size(const cts_os_input_t *in) {
  return in->file_size;
}
uint64_t cts_os_input_file_pos(const cts_os_input_t *in) {
  return in->file_pos;
}
bool cts_os_input_is_compressed(const cts_os_input_t *in) {
  return in->gzip || in->zstd;
}
bool cts_os_input_tail_lost(const cts_os_input_t *in) {
  return in->tail_lost;
}

void cts_os_input_close(cts_os_input_t *in) {
  if (!in) return;
  if (in->gzip) inflateEnd(&in->z);
  ZSTD_freeDCtx(in->zs);
  free(in->zbuf);
  free(in->cdec);
  free(in->grp);
  free(in->raw);
  if (in->owns_fd) close(in->fd);
  free(in);
}

/* A plain regular file is mapped a window at a time rather than read(): the reader then
 * decodes its packets in place, without the kernel's copy of every byte into a buffer. Each
 * window is populated when mapped (one call maps its pages, where touching them would take
 * a fault per few pages) and unmapped once fed, so the process's resident memory stays one
 * window whatever the file's size. Files below a window are read() as before. 1 MiB: the
 * same CPU time as 4 MiB windows on 160 MB traces (a syscall per MiB is nothing), and the
 * peak RSS of the read() path. */
#define MAP_WINDOW (1u << 20)

/* Whether in is a plain regular file whose descriptor is still at the start of the file,
 * past the bytes sniffed: feed_mapped() can take it from offset 0. */
static bool mappable(const cts_os_input_t *in) {
  return !in->gzip && !in->zstd && in->file_size >= MAP_WINDOW &&
         lseek(in->fd, 0, SEEK_CUR) == (off_t)in->npeek && in->file_pos == in->npeek;
}

/* A mapped page past the file's end faults (SIGBUS): another process may cut the file
 * shorter between the size check before a window and the last byte of it fed. The fault
 * is then the reader's error, not the process's end: the thread feeding a window points
 * bus_guard at a jump buffer, and the handler (installed once, for the process) jumps
 * back. A SIGBUS anywhere else goes to the disposition there was before. Thread-local,
 * so two threads may each read a mapped file. */
static __thread sigjmp_buf *bus_guard;
static struct sigaction bus_previous;
static pthread_once_t bus_once = PTHREAD_ONCE_INIT;
static bool bus_installed;

static void on_sigbus(int sig, siginfo_t *info, void *context) {
  sigjmp_buf *const guard = bus_guard;
  if (guard) siglongjmp(*guard, 1);
  if (bus_previous.sa_flags & SA_SIGINFO) {
    if (bus_previous.sa_sigaction) {
      bus_previous.sa_sigaction(sig, info, context);
      return;
    }
  } else if (bus_previous.sa_handler != SIG_DFL && bus_previous.sa_handler != SIG_IGN) {
    bus_previous.sa_handler(sig);
    return;
  }
  /* The default: returning re-executes the access, which now ends the process. */
  signal(SIGBUS, SIG_DFL);
}

static void install_bus_handler(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_sigbus;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  bus_installed = sigaction(SIGBUS, &sa, &bus_previous) == 0;
}

/* Feeds one mapped window under the SIGBUS guard: the reader's result, or CTS_E_IO when
 * the window's pages went away under it (*faulted set). */
static int feed_window(cts_mt_reader_t *reader, const void *m, size_t len, bool *faulted) {
  sigjmp_buf jump;
  *faulted = false;
  if (sigsetjmp(jump, 1) != 0) {
    bus_guard = NULL;
    *faulted = true;
    return CTS_E_IO;
  }
  bus_guard = &jump;
  const int e = cts_mt_reader_feed(reader, m, len);
  bus_guard = NULL;
  return e;
}

/* Feeds reader the file's first file_size bytes (its size when opened) through mappings,
 * leaving the descriptor after the bytes fed, for the caller to read() what follows (what
 * was appended since, or all of the file when the first mapping fails). 0 or the reader's
 * error; an input error sets *input_error. The file's size is checked before each window:
 * one cut shorter meanwhile (a tracer starting over in it) is read() from there, which
 * sees the new end. Only a cut between that check and the window's last byte fed (a
 * millisecond) makes an access fault, which feed_window() turns into an input error. */
static int feed_mapped(cts_os_input_t *in, cts_mt_reader_t *reader, cts_os_progress_cb progress,
                       void *progress_user_data, bool *input_error) {
  uint64_t pos = 0;
  int e = 0;
  pthread_once(&bus_once, install_bus_handler);
  if (!bus_installed) return 0; /* no guard: everything is read() */
  while (pos < in->file_size) {
    const size_t len =
        in->file_size - pos < MAP_WINDOW ? (size_t)(in->file_size - pos) : MAP_WINDOW;
    struct stat st;
    if (fstat(in->fd, &st) != 0 || (uint64_t)st.st_size < pos + len) break;
    void *const m = mmap(NULL, len, PROT_READ, MAP_PRIVATE | MAP_POPULATE, in->fd, (off_t)pos);
    if (m == MAP_FAILED) break;  /* the rest is read() */
    if (pos == 0) in->npeek = 0; /* the sniffed bytes are the mapping's first */
    bool faulted;
    e = feed_window(reader, m, len, &faulted);
    munmap(m, len);
    if (faulted) {
      char msg[160];
      snprintf(msg, sizeof msg,
               "the file was cut shorter while it was read, within bytes %llu-%llu",
               (unsigned long long)pos, (unsigned long long)(pos + len));
      cts_mt_reader_warn(reader, e, msg);
      *input_error = true;
    }
    if (e) break;
    pos += len;
    in->file_pos = pos;
    if (progress && pos % PROGRESS_EVERY == 0) progress(progress_user_data, pos, in->file_size);
  }
  if (!e && pos && lseek(in->fd, (off_t)pos, SEEK_SET) != (off_t)pos) {
    e = -errno;
    *input_error = true;
  }
  return e;
}

int cts_os_read_memtrace(const char *path, cts_mt_reader_t *reader, cts_os_progress_cb progress,
                         void *progress_user_data, bool *input_error) {
  *input_error = false;
  cts_os_input_t *in;
  int e = cts_os_input_open(&in, path);
  if (e) {
    *input_error = true;
    return e;
  }
  if (mappable(in) &&
      (e = feed_mapped(in, reader, progress, progress_user_data, input_error)) != 0) {
    cts_os_input_close(in);
    return e;
  }
  uint8_t *buf = malloc(CHUNK);
  if (!buf) {
    cts_os_input_close(in);
    *input_error = true;
    return -ENOMEM;
  }
  uint64_t next_report = in->file_pos + PROGRESS_EVERY;
  for (;;) {
    const ssize_t n = cts_os_input_read(in, buf, CHUNK);
    if (n < 0) {
      e = (int)n;
      *input_error = true;
      if (in->cols_msg[0]) {
        cts_mt_reader_warn(reader, e, in->cols_msg);
      } else if (e == CTS_E_BAD_COMPRESSION) {
        char msg[128];
        snprintf(msg, sizeof msg, "corrupt compressed data at or before file byte %llu",
                 (unsigned long long)in->file_pos);
        cts_mt_reader_warn(reader, e, msg);
      }
      break;
    }
    if (n == 0) {
      if (in->cols_msg[0])
        cts_mt_reader_warn(reader, CTS_E_TRUNCATED_PACKET, in->cols_msg);
      else if (in->tail_lost)
        cts_mt_reader_warn(reader, CTS_E_TRUNCATED_PACKET,
                           "the zstd stream ends inside a frame: the trace's tail was lost "
                           "(read up to the compressor's last complete block)");
      e = cts_mt_reader_finish(reader);
      break;
    }
    if ((e = cts_mt_reader_feed(reader, buf, (size_t)n)) != 0) break;
    if (progress && in->file_pos >= next_report) {
      progress(progress_user_data, in->file_pos, in->file_size);
      next_report = in->file_pos + PROGRESS_EVERY;
    }
  }
  if (progress) progress(progress_user_data, in->file_pos, in->file_size);
  free(buf);
  cts_os_input_close(in);
  return e;
}

bool cts_os_memtrace_span(const char *path, uint64_t *start_us, uint64_t *floor_us) {
  *start_us = *floor_us = 0;
  struct stat st;
  /* A path that is not a regular file, or a registered descriptor's name (which may not
   * exist as a file): only the descriptor's fstat below decides. */
  if (strcmp(path, "-") == 0 || (stat(path, &st) == 0 && !S_ISREG(st.st_mode))) return false;
  const int fd = cts_os_open_input(path);
  if (fd < 0) return false;
  bool known = false;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    const uint64_t size = (uint64_t)st.st_size;
    uint8_t h[68];
    uint64_t off = 0, pid = 0, next_id = 0;
    while (off < size) {
      const ssize_t n = pread(fd, h, sizeof h, (off_t)off);
      if (n < (ssize_t)MT_MIN_PREFIX || cts_ld_le32(h) != MT_MAGIC) break;
      cts__mt_header_t ph;
      const uint16_t version = cts_ld_le16(h + MT_VERSION_OFFSET);
      const uint32_t hsize = cts__mt_header_size(version);
      if ((size_t)n < hsize) break;
      cts__mt_parse_header(h, &ph);
      const uint64_t psize = ph.size_bits / 8;
      if (ph.size_bits % 8 || psize < hsize || psize > size - off || ph.time_begin > ph.time_end ||
          ph.alloc_id_begin > ph.alloc_id_end)
        break;
      if (!known) { /* the trace-info packet */
        *start_us = *floor_us = ph.time_begin;
        pid = ph.pid;
        known = true;
      } else if (ph.pid == pid && (version >= 3 || ph.alloc_id_begin == next_id)) {
        /* (v1/v2: a packet out of the ids' sequence is skipped by the reader) */
        if (ph.alloc_id_end > ph.alloc_id_begin && ph.time_begin > *floor_us)
          *floor_us = ph.time_begin;
        next_id = ph.alloc_id_end;
      }
      off += psize;
    }
  }
  close(fd);
  return known;
}
