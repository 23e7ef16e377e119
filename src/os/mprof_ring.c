/* SPDX-License-Identifier: MIT */
#include "mprof_ring.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "net.h"
#include "../common/clock.h"
#include "os.h"
#include "output.h"
#include "tsc_clock.h"

struct cts_os_mprof_ring {
  cts_mprof_ring_t *ring;
  void *memory;
  size_t size;
  bool mapped; /* memory is a mapping (file or anonymous) */
  bool stream;
  void *state;
  /* A connection opened by cts_os_mprof_stream_connect(), closed with the ring; the fd
   * plus one, so that 0 (calloc) means none. */
  int socket_plus1;
  int send_timeout_ms;
};

uint64_t cts_os_clock_ns(void *user_data) {
  (void)user_data;
  return cts_mono_ns();
}

/* The sink of a connected stream: send() with MSG_NOSIGNAL, so that a collector that goes
 * away is an error returned to the ring, never a SIGPIPE in the traced program. */
static int socket_sink(void *user_data, const void *buf, size_t len) {
  const cts_os_mprof_ring_t *r = user_data;
  return cts_net_write_all(r->socket_plus1 - 1, buf, len, r->send_timeout_ms);
}

static int make_ring(cts_os_mprof_ring_t *r, uint32_t packets, int stream_fd) {
  if (!packets) packets = CTS_MPROF_DEFAULT_PACKETS;
  const size_t state_size = CTS_MPROF_RING_STATE_SIZE(packets);
  r->state = aligned_alloc(8, (state_size + 7u) & ~(size_t)7u);
  if (!r->state) return -ENOMEM;
  cts_mprof_ring_config_t cfg;
  cts_mprof_ring_config_init(&cfg);
  cfg.buffer = r->memory;
  cfg.buffer_size = r->size;
  cfg.packets = packets;
  cfg.clock = cts_os_clock_ns;
  const char *const clock_choice = getenv("CTFSCOPE_CLOCK");
  if (!(clock_choice && strcmp(clock_choice, "monotonic") == 0)) {
    cts_tsc_clock_t tsc;
    if (cts_os_tsc_clock(&tsc) == 0) cfg.tsc = tsc;
  }
  if (r->socket_plus1) {
    cfg.sink = socket_sink;
    cfg.sink_user_data = r;
  } else if (stream_fd >= 0) {
    cfg.sink = cts_os_fd_write;
    cfg.sink_user_data = (void *)(intptr_t)stream_fd;
  }
  return cts_mprof_ring_init(&r->ring, r->state, state_size, &cfg);
}

int cts_os_map_file_reserved(int fd, size_t size, void **map) {
  *map = NULL;
  if (size == 0 || size > (size_t)INT64_MAX) return CTS_E_INVAL;
  /* A shared mapping of a sparse file gets its blocks when a page is first written: on a
   * full file system that write is a SIGBUS in the traced program. Every block is reserved
   * now, while a failure is still an error we can report. */
  int rc = posix_fallocate(fd, 0, (off_t)size);
  if (rc == EOPNOTSUPP || rc == EINVAL) {
    /* A file system without fallocate (glibc emulates it, but not everywhere): the blocks
     * are reserved by writing zeros. */
    static const char zeros[64 * 1024];
    rc = 0;
    for (size_t at = 0; at < size && !rc;) {
      const size_t n = size - at < sizeof zeros ? size - at : sizeof zeros;
      const ssize_t w = pwrite(fd, zeros, n, (off_t)at);
      if (w > 0)
        at += (size_t)w;
      else if (w == 0)
        rc = ENOSPC;
      else if (errno != EINTR)
        rc = errno;
    }
  }
  if (rc) return -rc;
  void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) return -errno;
  *map = m;
  return 0;
}

int cts_os_mprof_ring_open(cts_os_mprof_ring_t **out, const char *path, size_t size,
                           uint32_t packets) {
  *out = NULL;
  cts_os_mprof_ring_t *r = calloc(1, sizeof *r);
  if (!r) return -ENOMEM;
  int err = 0;
  const int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    err = -errno;
    goto fail;
  }
  void *map = NULL;
  err = size == 0 ? CTS_E_INVAL : cts_os_map_file_reserved(fd, size, &map);
  close(fd); /* the mapping keeps the file */
  if (err) {
    unlink(path); /* empty or partly reserved: not a trace */
    goto fail;
  }
  r->memory = map;
  r->size = size;
  r->mapped = true;
  err = make_ring(r, packets, -1);
  if (err) goto fail;
  *out = r;
  return 0;
fail:
  cts_os_mprof_ring_close(r);
  return err;
}

/* A stream ring on @p fd; @p owned: the ring closes it (a connection made here), and sends
 * with socket_sink, waiting at most @p timeout_ms. */
static int stream_open(cts_os_mprof_ring_t **out, int fd, bool owned, int timeout_ms,
                       size_t packet_size, uint32_t packets) {
  *out = NULL;
  if (!packets) packets = CTS_MPROF_DEFAULT_PACKETS;
  if (packet_size < CTS_MPROF_MIN_PACKET_SIZE || packet_size > (SIZE_MAX / packets))
    return CTS_E_INVAL;
  cts_os_mprof_ring_t *r = calloc(1, sizeof *r);
  if (!r) return -ENOMEM;
  if (owned) {
    r->socket_plus1 = fd + 1;
    r->send_timeout_ms = timeout_ms;
  }
  r->size = packet_size * packets;
  r->memory = mmap(NULL, r->size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  int err = 0;
  if (r->memory == MAP_FAILED) {
    r->memory = NULL;
    err = -errno;
    goto fail;
  }
  r->mapped = true;
  r->stream = true;
  err = make_ring(r, packets, fd);
  if (err) goto fail;
  *out = r;
  return 0;
fail:
  r->socket_plus1 = 0; /* the caller closes its descriptor */
  cts_os_mprof_ring_close(r);
  return err;
}

int cts_os_mprof_stream_open(cts_os_mprof_ring_t **out, int fd, size_t packet_size,
                             uint32_t packets) {
  return stream_open(out, fd, false, -1, packet_size, packets);
}

int cts_os_mprof_stream_connect(cts_os_mprof_ring_t **out, const char *address, int timeout_ms,
                                size_t packet_size, uint32_t packets, char *errbuf, size_t errlen) {
  *out = NULL;
  char msg[CTS_NET_ERR_LEN] = "";
  cts_net_addr_t addr;
  int err = address ? cts_net_parse_connect(address, &addr, msg, sizeof msg) : CTS_E_INVAL;
  int fd = -1;
  if (!err) {
    err = cts_net_connect(&addr, timeout_ms, &fd);
    if (err) snprintf(msg, sizeof msg, "cannot connect to %s: %s", address, cts_os_strerror(err));
  }
  if (!err) {
    err = stream_open(out, fd, true, timeout_ms, packet_size, packets);
    if (err) {
      close(fd); /* stream_open() closes it only once the ring exists */
      snprintf(msg, sizeof msg, "%s: cannot set up the stream: %s", address, cts_os_strerror(err));
    }
  }
  if (err && errbuf && errlen) snprintf(errbuf, errlen, "%s", msg[0] ? msg : cts_os_strerror(err));
  return err;
}

cts_mprof_ring_t *cts_os_mprof_ring_borrow(cts_os_mprof_ring_t *r) {
  return r->ring;
}

int cts_os_mprof_ring_close(cts_os_mprof_ring_t *r) {
  if (!r) return 0;
  int err = 0;
  if (r->ring && r->stream) err = cts_mprof_ring_flush(r->ring);
  if (r->mapped && r->memory) munmap(r->memory, r->size);
  if (r->socket_plus1) close(r->socket_plus1 - 1);
  free(r->state);
  free(r);
  return err;
}

int cts_os_mprof_write_metadata(const char *dir) {
  char path[4096];
  if ((size_t)snprintf(path, sizeof path, "%s/metadata", dir) >= sizeof path) return -ENAMETOOLONG;
  cts_outfile_t f; /* written aside and renamed: a failure keeps the old file */
  int err = cts_outfile_open(&f, path);
  if (err) return err;
  const char *m = cts_mprof_metadata();
  err = cts_os_fd_write((void *)(intptr_t)f.fd, m, strlen(m));
  if (err) {
    cts_outfile_discard(&f);
    return err;
  }
  return cts_outfile_commit(&f);
}

typedef struct fd_source {
  int fd;
  bool failed;
} fd_source_t;

static int fd_read_at(void *user_data, uint64_t offset, void *buf, size_t len) {
  fd_source_t *s = user_data;
  uint8_t *p = buf;
  while (len) {
    const ssize_t n = pread(s->fd, p, len, (off_t)offset);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      s->failed = true;
      return n < 0 ? -errno : CTS_E_TRUNCATED_PACKET; /* the file shrank under us */
    }
    p += n;
    offset += (uint64_t)n;
    len -= (size_t)n;
  }
  return 0;
}

int cts_os_mprof_read_file(const char *path, const cts_mprof_handler_t *h, bool file_order,
                           cts_mprof_summary_t *summary, char *errbuf, size_t errlen,
                           bool *input_error) {
  *input_error = false;
  /* "-": standard input, which must then be a file (the reader reads at offsets; the CLI
   * copies a piped task trace into a temporary file first). */
  const bool from_stdin = strcmp(path, "-") == 0;
  int fd = from_stdin ? fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3) : cts_os_open_input(path);
  if (fd == -1) fd = -errno; /* fcntl's failure */
  fd_source_t src = {fd, false};
  struct stat st;
  if (src.fd < 0 || fstat(src.fd, &st) != 0) {
    const int err = src.fd < 0 ? src.fd : -errno;
    if (src.fd >= 0) close(src.fd);
    *input_error = true;
    if (errbuf && errlen) snprintf(errbuf, errlen, "cannot open '%s': %s", path, strerror(-err));
    return err;
  }
  if (from_stdin && !S_ISREG(st.st_mode)) {
    close(src.fd);
    *input_error = true;
    if (errbuf && errlen)
      snprintf(errbuf, errlen,
               "standard input is not a file: task traces are read at offsets (save it first)");
    return CTS_E_IO;
  }
  cts_mprof_reader_config_t cfg;
  cts_mprof_reader_config_init(&cfg);
  cfg.allocator = cts_os_allocator();
  cfg.file_order = file_order;
  const int err =
      cts_mprof_read(&cfg, fd_read_at, &src, (uint64_t)st.st_size, h, summary, errbuf, errlen);
  close(src.fd);
  if (src.failed) *input_error = true;
  return err;
}

bool cts_os_is_mprof_file(const char *path) {
  uint8_t head[20];
  const int fd = cts_os_open_input(path);
  if (fd < 0) return false;
  const ssize_t n = pread(fd, head, sizeof head, 0);
  close(fd);
  return n == (ssize_t)sizeof head && cts_mprof_is_trace(head, sizeof head);
}
