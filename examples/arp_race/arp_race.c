/* SPDX-License-Identifier: MIT */
/* The race of the MirageOS tracing tutorial ("Tracing and Profiling", mirage.io, 2014),
 * replayed in C with ctfscope's task API (include/ctfscope/tasks.h).
 *
 * A unikernel opens a TCP connection: ARP must first find the peer's MAC address. The ARP
 * code creates an "ARP response" condition, sends a probe ("ring.write") and, once the
 * network driver confirms the probe left, waits on the condition. When the ARP reply
 * arrives, the condition is notified and the connection proceeds. Usually the driver's
 * confirmation comes first; sometimes the reply does: the condition is then notified while
 * nobody waits (and the notification is lost), the wait starts afterwards, and the program
 * hangs. The main task is marked should_resolve, so mirage-trace-viewer draws it as a red
 * line ("should-resolve thread never resolved") in the bad trace.
 *
 * Everything here is a deterministic simulation: a small promise library in the style of
 * Lwt (wait/task promises, bind, a condition whose notifications go through a dummy task),
 * an event loop, and a fake network whose two first events arrive in the order chosen on
 * the command line. Each run writes one mirage-profile trace (1 MB in memory, like
 * mirage-profile's default, saved at the end).
 *
 * The network and the connection allocate as a real stack would, on threads of their own:
 * the driver's receive thread (netif_rx) puts every frame in a buffer of its own, which
 * the event loop frees once handled; the TCP connection (tcp_connection, started once
 * connected) has its send and receive windows and a segment buffer. The event loop keeps
 * the ARP cache entry. Under `ctfscope record --tasks` these threads are tasks of the
 * recorder's task trace, and `ctfscope top --by task` or the report's "Memory by running
 * task" say what each allocated. Only the event loop writes this program's own trace, so
 * the threads change nothing in it.
 *
 *   arp_race --good|--bad|--seed N [-o FILE]   one run (exit 0 if main resolved, 2 if not)
 *   arp_race --both DIR                        both runs: DIR/arp_good.ctf, DIR/arp_bad.ctf
 *
 * Then: `ctfscope dump DIR/arp_bad.ctf`, `ctfscope convert` for babeltrace2, or
 * mirage-trace-viewer. The two traces are the same up to the first network event. */
#include <ctfscope/tasks.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- a tiny promise library ---------------------------------------------------------- */

typedef struct promise promise_t;
typedef void (*callback_t)(promise_t *resolved, void *arg);

struct promise {
  cts_task_id_t id;
  const char *name;
  int resolved;
  int nwaiters;
  struct {
    callback_t fn;
    void *arg;
    cts_task_id_t bind; /* the Bind task that runs the callback */
  } waiters[4];
};

static promise_t pool[32];
static int npromises;

static promise_t *promise_new(cts_task_id_t id, const char *name) {
  if (npromises == (int)(sizeof pool / sizeof pool[0])) abort();
  promise_t *p = &pool[npromises++];
  p->id = id;
  p->name = name;
  return p;
}

/* Lwt.wait / MProf.Trace.named_wait */
static promise_t *named_wait(const char *name) {
  return promise_new(cts_task_named_wait(name), name);
}

/* Lwt.task / named_task */
static promise_t *named_task(const char *name) {
  return promise_new(cts_task_named_task(name), name);
}

/* p >>= fn: a Bind task that waits for p (try_read) and runs fn once p is resolved. */
static void bind(promise_t *p, callback_t fn, void *arg) {
  const cts_task_id_t b = cts_task_create(CTS_TASK_BIND);
  if (p->resolved) {
    cts_task_read(b, p->id);
    fn(p, arg);
    return;
  }
  cts_task_try_read(b, p->id);
  p->waiters[p->nwaiters].fn = fn;
  p->waiters[p->nwaiters].arg = arg;
  p->waiters[p->nwaiters].bind = b;
  p->nwaiters++;
}

/* Lwt.wakeup: the current task resolves p; its callbacks run now, each in its Bind task,
 * and the resolver runs again afterwards. */
static void resolve(promise_t *p) {
  const cts_task_id_t resolver = cts_task_current();
  cts_task_resolved(p->id);
  p->resolved = 1;
  for (int i = 0; i < p->nwaiters; i++) {
    cts_task_read(p->waiters[i].bind, p->id);
    p->waiters[i].fn(p, p->waiters[i].arg);
  }
  p->nwaiters = 0;
  cts_task_switch(resolver);
}

/* Lwt_condition: notifications go through the condition's dummy task (§7.2 note_signal);
 * a notification with no waiter is lost. */
typedef struct condition {
  cts_task_id_t id;
  const char *name;
  promise_t *waiters[4];
  int nwaiters;
} condition_t;

static condition_t *named_condition(const char *name) {
  static condition_t conds[4];
  static int n;
  condition_t *c = &conds[n++];
  c->id = cts_task_named_condition(name);
  c->name = name;
  return c;
}

static promise_t *condition_wait(condition_t *c) {
  promise_t *waiter = named_task(c->name);
  c->waiters[c->nwaiters++] = waiter;
  return waiter;
}

static void condition_broadcast(condition_t *c) {
  const cts_task_id_t sender = cts_task_current();
  cts_task_signal(c->id, sender);
  const int n = c->nwaiters;
  c->nwaiters = 0;
  for (int i = 0; i < n; i++) resolve(c->waiters[i]);
  cts_task_switch(sender);
}

/* ---- the network: frames received by the driver's thread, in order ------------------- */

/* What the peer sends next goes on the wire; the receive thread turns each into a frame
 * (a buffer of its own) on the receive queue, which the event loop takes in order. */
typedef enum net_event { PROBE_SENT, ARP_REPLY, SYN_ACK, NET_STOP } net_event_t;
#define FRAME_SIZE 2048 /* a page-sized receive buffer, as netfront has */
typedef struct frame {
  net_event_t ev;
  unsigned char *data;
} frame_t;
static net_event_t wire[8];
static frame_t rxq[8];
static int wire_head, wire_len, rxq_head, rxq_len, in_flight;
static pthread_mutex_t net_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wire_ready = PTHREAD_COND_INITIALIZER, rx_ready = PTHREAD_COND_INITIALIZER;

static void net_deliver_later(net_event_t ev) {
  pthread_mutex_lock(&net_lock);
  wire[(wire_head + wire_len++) % 8] = ev;
  if (ev != NET_STOP) in_flight++;
  pthread_cond_signal(&wire_ready);
  pthread_mutex_unlock(&net_lock);
}

/* The driver's receive thread (exported: `record --tasks` names threads by their start
 * routine's dynamic symbol). */
void *netif_rx(void *arg);
void *netif_rx(void *arg) {
  (void)arg;
  for (;;) {
    pthread_mutex_lock(&net_lock);
    while (wire_len == 0) pthread_cond_wait(&wire_ready, &net_lock);
    const net_event_t ev = wire[wire_head];
    wire_head = (wire_head + 1) % 8;
    wire_len--;
    pthread_mutex_unlock(&net_lock);
    if (ev == NET_STOP) return NULL;
    unsigned char *data = malloc(FRAME_SIZE);
    if (!data) abort();
    memset(data, (int)ev, FRAME_SIZE);
    pthread_mutex_lock(&net_lock);
    rxq[(rxq_head + rxq_len++) % 8] = (frame_t){ev, data};
    pthread_cond_signal(&rx_ready);
    pthread_mutex_unlock(&net_lock);
  }
}

/* The next frame, in the order the peer sent them; false when none is on its way. */
static int net_receive(frame_t *f) {
  pthread_mutex_lock(&net_lock);
  const int more = in_flight > 0;
  if (more) {
    while (rxq_len == 0) pthread_cond_wait(&rx_ready, &net_lock);
    *f = rxq[rxq_head];
    rxq_head = (rxq_head + 1) % 8;
    rxq_len--;
    in_flight--;
  }
  pthread_mutex_unlock(&net_lock);
  return more;
}

/* The TCP connection's thread: its windows (kept while it lives) and a segment for "!". */
#define WINDOW_SIZE  65536
#define SEGMENT_SIZE 1460
void *tcp_connection(void *arg);
void *tcp_connection(void *arg) {
  (void)arg;
  unsigned char *tx = malloc(WINDOW_SIZE), *rx = malloc(WINDOW_SIZE), *seg = malloc(SEGMENT_SIZE);
  if (!tx || !rx || !seg) abort();
  memset(tx, 0, WINDOW_SIZE);
  memset(rx, 0, WINDOW_SIZE);
  memcpy(seg, "!", 2);
  free(seg);
  free(rx);
  free(tx);
  return NULL;
}

/* ---- the unikernel ------------------------------------------------------------------- */

static cts_task_counter_t tcp_to_ip = CTS_TASK_COUNTER_INIT("tcp-to-ip", 0);
static condition_t *arp_response;   /* the pending ARP query for 10.0.0.1 */
static promise_t *ring_write;       /* the probe being transmitted */
static promise_t *tcp_connect_done; /* "TCP connect" */
static promise_t *main_done;        /* what the unikernel's start function returns */
static int mac_known;
static void *arp_cache; /* the entry for 10.0.0.1, kept for the program's life */

static void connected(promise_t *p, void *arg) {
  (void)p, (void)arg;
  printf("TCP: connected, sending \"!\"\n");
  pthread_t conn;
  if (pthread_create(&conn, NULL, tcp_connection, NULL) != 0 || pthread_join(conn, NULL) != 0)
    abort();
  cts_task_counter_increase(&tcp_to_ip, 1);
  resolve(main_done);
}

static void got_mac(promise_t *p, void *arg) {
  (void)p, (void)arg;
  printf("TCP: sending SYN to 10.0.0.1\n");
  net_deliver_later(SYN_ACK);
}

/* The ARP query's continuation once the probe is on the wire: wait for the response. The
 * bug: the response may have come (and its notification gone) already. */
static void probe_sent(promise_t *p, void *arg) {
  (void)p, (void)arg;
  cts_task_label_current("Wait for ARP response");
  bind(condition_wait(arp_response), got_mac, NULL);
}

static void arp_query(void) {
  printf("ARP: transmitting probe -> 10.0.0.1\n");
  arp_cache = calloc(1, 64);
  if (!arp_cache) abort();
  arp_response = named_condition("ARP response");
  ring_write = named_task("ring.write");
  bind(ring_write, probe_sent, NULL);
}

static void unikernel_start(void) {
  main_done = named_wait("main");
  cts_task_should_resolve(main_done->id);
  tcp_connect_done = named_wait("TCP connect");
  bind(tcp_connect_done, connected, NULL);
  arp_query();
}

/* The driver's event channel: every network event arrives as port-4 running. */
static cts_task_id_t port4;

static void handle(net_event_t ev) {
  cts_task_switch(port4);
  switch (ev) {
    case PROBE_SENT:
      resolve(ring_write);
      break;
    case ARP_REPLY:
      printf("ARP: updating 10.0.0.1 -> fe:ff:ff:ff:ff:ff\n");
      mac_known = 1;
      condition_broadcast(arp_response);
      break;
    case SYN_ACK:
      resolve(tcp_connect_done);
      break;
    case NET_STOP: /* the receive thread's, never a frame */
      break;
  }
}

/* Runs the unikernel until the event loop has nothing left; returns whether main resolved. */
static int run(int bad) {
  cts_task_label_current("unikernel");
  port4 = cts_task_named_task("port-4");
  unikernel_start();
  pthread_t rx;
  if (pthread_create(&rx, NULL, netif_rx, NULL) != 0) abort();
  /* The race: which of the two arrives first depends on the host's timing. */
  net_deliver_later(bad ? ARP_REPLY : PROBE_SENT);
  net_deliver_later(bad ? PROBE_SENT : ARP_REPLY);
  for (;;) {
    cts_task_idle(); /* blocked in the event loop's poll */
    frame_t f;
    if (!net_receive(&f)) break;
    handle(f.ev);
    free(f.data);
  }
  net_deliver_later(NET_STOP);
  if (pthread_join(rx, NULL) != 0) abort();
  return main_done->resolved;
}

/* ---- tracing -------------------------------------------------------------------------- */

static uint64_t monotonic_ns(void *unused) {
  (void)unused;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* One traced run into @p path; returns 0 if main resolved, 2 if it hung, 1 on error. */
static int traced_run(int bad, const char *path) {
  static uint8_t buffer[1000000];
  static uint64_t state[CTS_MPROF_RING_STATE_SIZE(4) / 8];
  cts_mprof_ring_config_t cfg;
  cts_mprof_ring_config_init(&cfg);
  cfg.buffer = buffer;
  cfg.buffer_size = sizeof buffer;
  cfg.clock = monotonic_ns;
  cts_mprof_ring_t *ring;
  if (cts_mprof_ring_init(&ring, state, sizeof state, &cfg) != 0 || cts_task_start(ring) != 0)
    return 1;
  const int resolved = run(bad);
  cts_task_stop();
  printf(resolved ? "main returned 0\n"
                  : "(the event loop is idle and main never resolved: a hang)\n");
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(buffer, 1, sizeof buffer, f) != sizeof buffer || fclose(f) != 0) {
    fprintf(stderr, "arp_race: cannot write %s\n", path);
    return 1;
  }
  printf("trace: %s\n", path);
  return resolved ? 0 : 2;
}

static int usage(void) {
  fprintf(stderr,
          "usage: arp_race --good|--bad|--seed N [-o FILE]\n"
          "       arp_race --both DIR\n");
  return 1;
}

int main(int argc, char **argv) {
  int bad = -1;
  const char *out = "arp_race.ctf", *both = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--good") == 0) {
      bad = 0;
    } else if (strcmp(argv[i], "--bad") == 0) {
      bad = 1;
    } else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
      /* a stand-in for the host's timing: one bit of a mixed seed picks the order */
      uint64_t x = strtoull(argv[++i], NULL, 10) * 0x9e3779b97f4a7c15ull;
      x ^= x >> 29;
      bad = (int)((x * 0xbf58476d1ce4e5b9ull) >> 63);
    } else if (strcmp(argv[i], "-o") == 0 && i + 1 < argc) {
      out = argv[++i];
    } else if (strcmp(argv[i], "--both") == 0 && i + 1 < argc) {
      both = argv[++i];
    } else {
      return usage();
    }
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (!both) {
    if (bad < 0) return usage();
    printf("run: %s order of events\n", bad ? "bad" : "good");
    return traced_run(bad, out);
  }
  /* Each run in its own process, so that both number their tasks from 1. */
  int status[2];
  for (int run_bad = 0; run_bad < 2; run_bad++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/arp_%s.ctf", both, run_bad ? "bad" : "good");
    fflush(stdout);
    const pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) {
      printf("run: %s order of events\n", run_bad ? "bad" : "good");
      _exit(traced_run(run_bad, path));
    }
    int st = 0;
    waitpid(pid, &st, 0);
    status[run_bad] = WIFEXITED(st) ? WEXITSTATUS(st) : 1;
  }
  /* as expected: the good run resolves main, the bad one hangs */
  return status[0] == 0 && status[1] == 2 ? 0 : 1;
}
