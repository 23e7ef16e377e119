/* SPDX-License-Identifier: MIT */
/* mirage-profile CTF reader (docs/formats/mprof.md §4). Every byte is untrusted: headers
 * are checked before anything is allocated for them, sizes are bounded by the config, and
 * a malformed event only ends its own packet. */
#include <ctfscope/mprof.h>

#include <string.h>

#include "../common/compiler.h"
#include "fmt.h"
#include "mprof_wire.h"

#define DEFAULT_MAX_PACKETS     (1u << 20)
#define DEFAULT_MAX_PACKET_SIZE (256u << 20)
#define MAX_SORTED_PACKETS      32768u /* beyond this, 16-bit counts cannot order packets */

typedef struct packet_entry {
  uint64_t offset;
  uint32_t size, content;
  uint32_t file_index;
  uint16_t count;
  bool truncated;
} packet_entry_t;

typedef struct reader {
  const cts_mprof_reader_config_t *cfg;
  cts_mprof_read_at_cb read_at;
  void *read_user_data;
  uint64_t size;
  const cts_mprof_handler_t *h;
  cts_mprof_summary_t *sum;
  char *errbuf;
  size_t errlen;
  packet_entry_t *packets;
  size_t npackets, cap;
  uint8_t *buf;
  size_t buf_cap;
} reader_t;

void cts_mprof_reader_config_init(cts_mprof_reader_config_t *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->struct_size = sizeof *cfg;
  cfg->max_packets = DEFAULT_MAX_PACKETS;
  cfg->max_packet_size = DEFAULT_MAX_PACKET_SIZE;
}

int cts_mprof_memory_read_at(void *user_data, uint64_t offset, void *buf, size_t len) {
  const cts_mprof_memory_t *m = user_data;
  if (offset > m->size || len > m->size - offset) return CTS_E_TRUNCATED_PACKET;
  memcpy(buf, (const uint8_t *)m->data + offset, len);
  return 0;
}

bool cts_mprof_is_trace(const void *data, size_t len) {
  const uint8_t *p = data;
  return len >= MPROF_OFF_UUID + sizeof cts__mprof_uuid && cts_ld_le32(p) == MPROF_MAGIC &&
         memcmp(p + MPROF_OFF_UUID, cts__mprof_uuid, sizeof cts__mprof_uuid) == 0;
}

static int fail(reader_t *r, int err, uint64_t offset, const char *what) {
  if (r->errbuf && r->errlen)
    cts__fmt(r->errbuf, r->errlen, "offset %llu: %s", (unsigned long long)offset, what);
  return err;
}

static void warn(reader_t *r, int code, uint64_t offset, const char *message) {
  r->sum->warnings++;
  if (r->h->on_warning) r->h->on_warning(r->h->user_data, code, offset, message);
}

static void *mem_alloc(const reader_t *r, size_t size) {
  return r->cfg->allocator.alloc(r->cfg->allocator.user_data, size);
}
static void mem_free(const reader_t *r, void *p, size_t size) {
  if (p) r->cfg->allocator.free(r->cfg->allocator.user_data, p, size);
}

static int push_packet(reader_t *r, const packet_entry_t *e) {
  if (r->npackets == r->cap) {
    const size_t cap = r->cap ? r->cap * 2 : 16;
    packet_entry_t *n = mem_alloc(r, cap * sizeof *n);
    if (!n) return CTS_E_NOMEM;
    if (r->npackets) memcpy(n, r->packets, r->npackets * sizeof *n);
    mem_free(r, r->packets, r->cap * sizeof *r->packets);
    r->packets = n;
    r->cap = cap;
  }
  r->packets[r->npackets++] = *e;
  return 0;
}

/* Pass 1: walk the packet headers (§4 step 2). */
static int scan_headers(reader_t *r) {
  char msg[160];
  uint64_t off = 0;
  while (off < r->size) {
    const uint64_t left = r->size - off;
    if (left < MPROF_HEADER) {
      cts__fmt(msg, sizeof msg, "%llu trailing bytes, too few for a packet header, ignored",
               (unsigned long long)left);
      warn(r, CTS_E_TRUNCATED_HEADER, off, msg);
      break;
    }
    uint8_t h[MPROF_HEADER];
    int err = r->read_at(r->read_user_data, off, h, sizeof h);
    if (err) return fail(r, err, off, "cannot read the packet header");
    const uint32_t magic = cts_ld_le32(h + MPROF_OFF_MAGIC);
    if (magic != MPROF_MAGIC) {
      cts__fmt(msg, sizeof msg, "bad packet magic 0x%08x (expected 0xc1fc1fc1)", magic);
      return fail(r, CTS_E_BAD_MAGIC, off, msg);
    }
    if (memcmp(h + MPROF_OFF_UUID, cts__mprof_uuid, sizeof cts__mprof_uuid) != 0)
      return fail(r, CTS_E_BAD_MAGIC, off + MPROF_OFF_UUID,
                  "packet uuid is not mirage-profile's 05883b8d-521a-487b-b397-456ab150680c");
    const uint32_t size_bits = cts_ld_le32(h + MPROF_OFF_PACKET_SIZE);
    const uint32_t content_bits = cts_ld_le32(h + MPROF_OFF_CONTENT_SIZE);
    if (size_bits % 8u || size_bits / 8u < MPROF_HEADER) {
      cts__fmt(msg, sizeof msg, "packet_size %u bits is not a whole number of bytes >= 30",
               size_bits);
      return fail(r, CTS_E_PACKET_SIZE, off + MPROF_OFF_PACKET_SIZE, msg);
    }
    if (size_bits / 8u > r->cfg->max_packet_size) {
      cts__fmt(msg, sizeof msg, "packet of %u bytes is larger than the limit (%u)", size_bits / 8u,
               r->cfg->max_packet_size);
      return fail(r, CTS_E_PACKET_TOO_LARGE, off + MPROF_OFF_PACKET_SIZE, msg);
    }
    if (content_bits < MPROF_HEADER * 8u || content_bits > size_bits) {
      cts__fmt(msg, sizeof msg, "content_size %u bits outside [240, packet_size %u]", content_bits,
               size_bits);
      return fail(r, CTS_E_PACKET_SIZE, off + MPROF_OFF_CONTENT_SIZE, msg);
    }
    if (r->npackets >= r->cfg->max_packets) {
      cts__fmt(msg, sizeof msg, "more than %u packets (the reader's limit)", r->cfg->max_packets);
      return fail(r, CTS_E_LIMIT, off, msg);
    }
    packet_entry_t e = {off,
                        size_bits / 8u,
                        content_bits / 8u,
                        (uint32_t)r->npackets,
                        cts_ld_le16(h + MPROF_OFF_COUNT),
                        false};
    if (e.size > left) {
      e.truncated = true;
      if (e.content > left) e.content = (uint32_t)left;
      cts__fmt(msg, sizeof msg, "the input ends inside this packet (%llu of %u bytes)",
               (unsigned long long)left, e.size);
      warn(r, CTS_E_TRUNCATED_PACKET, off, msg);
    }
    err = push_packet(r, &e);
    if (err) return fail(r, err, off, "out of memory for the packet table");
    off += e.truncated ? left : e.size;
  }
  return 0;
}

/* §4 step 3: the oldest packet is the first one "behind" its predecessor; then a stable
 * sort by count distance from it (a counting sort: keys are 16-bit). */
static int order_packets(reader_t *r) {
  const size_t n = r->npackets;
  size_t oldest = 0;
  for (size_t i = 1; i < n; i++)
    if ((uint16_t)(r->packets[i].count - r->packets[i - 1].count) > 0x8000u) {
      oldest = i;
      break;
    }
  r->sum->wrapped = oldest != 0;
  const uint16_t base = r->packets[oldest].count;
  uint32_t *starts = mem_alloc(r, 65537u * sizeof *starts);
  packet_entry_t *sorted = mem_alloc(r, n * sizeof *sorted);
  if (!starts || !sorted) {
    mem_free(r, starts, 65537u * sizeof *starts);
    mem_free(r, sorted, n * sizeof *sorted);
    return fail(r, CTS_E_NOMEM, 0, "out of memory ordering packets");
  }
  memset(starts, 0, 65537u * sizeof *starts);
  for (size_t i = 0; i < n; i++) starts[(uint16_t)(r->packets[i].count - base) + 1u]++;
  for (size_t k = 1; k <= 65536u; k++) starts[k] += starts[k - 1];
  for (size_t i = 0; i < n; i++)
    sorted[starts[(uint16_t)(r->packets[i].count - base)]++] = r->packets[i];
  memcpy(r->packets, sorted, n * sizeof *sorted);
  mem_free(r, starts, 65537u * sizeof *starts);
  mem_free(r, sorted, n * sizeof *sorted);
  r->sum->sequence_order = true;
  return 0;
}

static const char *const malformed_text[] = {
    "event header cut short by content_size", "unknown event id", "event runs past content_size",
    "string without a terminating NUL before content_size"};

/* Decodes one packet's events (§4 steps 4-5). Returns a callback's value or a read error. */
static int decode_packet(reader_t *r, const packet_entry_t *e) {
  if (e->content > r->buf_cap) {
    mem_free(r, r->buf, r->buf_cap);
    r->buf_cap = 0;
    r->buf = mem_alloc(r, e->content);
    if (!r->buf) return fail(r, CTS_E_NOMEM, e->offset, "out of memory for a packet");
    r->buf_cap = e->content;
  }
  int err = r->read_at(r->read_user_data, e->offset, r->buf, e->content);
  if (err) return fail(r, err, e->offset, "cannot read the packet");
  const uint8_t *base = r->buf;
  uint32_t pos = MPROF_HEADER;
  while (pos < e->content) {
    const uint8_t *p = base + pos;
    const uint32_t left = e->content - pos;
    int malformed = -1;
    uint32_t size = 0;
    cts_mprof_event_t ev = {0};
    if (left < MPROF_EVENT_HEADER) {
      malformed = 0;
    } else if (p[8] >= CTS_MPROF_EVENT_IDS) {
      malformed = 1;
    } else {
      const unsigned id = p[8];
      const cts__mprof_layout_t l = cts__mprof_layouts[id];
      size = cts__mprof_fixed_size(id);
      if (size > left) {
        malformed = 2;
      } else {
        const uint8_t *q = p + MPROF_EVENT_HEADER;
        ev.time_ns = cts_ld_le64(p);
        ev.id = (uint8_t)id;
        ev.thread = CTS_TASK_NONE;
        if (l.context) ev.thread = (int64_t)cts_ld_le64(q), q += 8;
        if (l.word) {
          const uint64_t w = cts_ld_le64(q);
          q += 8;
          if (cts__mprof_word_is_value(id))
            ev.value = (int64_t)w;
          else
            ev.arg = w;
        }
        if (l.type_byte) ev.thread_type = *q++;
        if (l.string) {
          const uint8_t *nul = memchr(q, 0, (size_t)(base + e->content - q));
          if (!nul) {
            malformed = 3;
          } else {
            ev.str = (const char *)q;
            ev.str_len = (size_t)(nul - q);
            size += (uint32_t)ev.str_len;
          }
        }
      }
    }
    const uint64_t off = e->offset + pos;
    if (malformed >= 0) {
      static const int codes[] = {CTS_E_EVENT_OVERRUN, CTS_E_UNKNOWN_EVENT, CTS_E_EVENT_OVERRUN,
                                  CTS_E_UNTERMINATED_STRING};
      char msg[200];
      cts__fmt(msg, sizeof msg, "%s (id %u); the rest of packet %u (%u bytes) is skipped",
               malformed_text[malformed], left > 8 ? p[8] : 0u, e->count, left);
      warn(r, codes[malformed], off, msg);
      break;
    }
    ev.offset = off;
    ev.packet_count = e->count;
    if (!r->sum->events) r->sum->first_time_ns = ev.time_ns;
    r->sum->last_time_ns = ev.time_ns;
    r->sum->events++;
    r->sum->events_by_id[ev.id]++;
    if (r->h->on_event) {
      err = r->h->on_event(r->h->user_data, &ev);
      if (err) return err;
    }
    pos += size;
  }
  return 0;
}

int cts_mprof_read(const cts_mprof_reader_config_t *cfg, cts_mprof_read_at_cb read_at,
                   void *read_user_data, uint64_t size, const cts_mprof_handler_t *h,
                   cts_mprof_summary_t *summary, char *errbuf, size_t errlen) {
  cts_mprof_summary_t local;
  if (!summary) summary = &local;
  memset(summary, 0, sizeof *summary);
  if (errbuf && errlen) errbuf[0] = 0;
  static const cts_mprof_handler_t no_handler;
  reader_t r = {.cfg = cfg,
                .read_at = read_at,
                .read_user_data = read_user_data,
                .size = size,
                .h = h ? h : &no_handler,
                .sum = summary,
                .errbuf = errbuf,
                .errlen = errlen};
  if (!cfg || cfg->struct_size < sizeof *cfg || !cfg->allocator.alloc || !cfg->allocator.free ||
      !read_at)
    return fail(&r, CTS_E_INVAL, 0, "invalid reader configuration");
  int err = scan_headers(&r);
  if (!err && r.npackets == 0) err = fail(&r, CTS_E_EMPTY, 0, "no packet: the input is empty");
  if (err) goto end;
  summary->packets = r.npackets;
  if (!cfg->file_order && r.npackets <= MAX_SORTED_PACKETS) {
    err = order_packets(&r);
    if (err) goto end;
  } else if (!cfg->file_order) {
    warn(&r, CTS_E_LIMIT, 0, "more than 32768 packets: read in file order");
  }
  summary->first_index = r.packets[0].file_index;
  for (size_t i = 0; i < r.npackets && !err; i++) {
    const packet_entry_t *e = &r.packets[i];
    if (h && h->on_packet) {
      const cts_mprof_packet_t pk = {e->offset, e->size,       e->content,
                                     e->count,  e->file_index, e->truncated};
      err = h->on_packet(h->user_data, &pk);
      if (err) break;
    }
    err = decode_packet(&r, e);
  }
end:
  mem_free(&r, r.packets, r.cap * sizeof *r.packets);
  mem_free(&r, r.buf, r.buf_cap);
  return err;
}
