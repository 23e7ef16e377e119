/* SPDX-License-Identifier: MIT */
/* The example unikernel's hardware: port I/O, the 16550 serial ports, the time-stamp
 * counter calibrated against the PIT, the CMOS clock, and QEMU's isa-debug-exit device.
 * Single CPU, no interrupts: nothing here is thread- or interrupt-safe, and nothing needs
 * to be. */
#ifndef UNIKERNEL_HW_H
#define UNIKERNEL_HW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

static inline void outb(uint16_t port, uint8_t v) {
  __asm__ volatile("outb %0, %1" : : "a"(v), "Nd"(port));
}
static inline uint8_t inb(uint16_t port) {
  uint8_t v;
  __asm__ volatile("inb %1, %0" : "=a"(v) : "Nd"(port));
  return v;
}
static inline uint64_t rdtsc(void) {
  uint32_t lo, hi;
  __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
  return (uint64_t)hi << 32 | lo;
}

#define COM1 0x3F8
#define COM2 0x2F8
#define COM3 0x3E8

/** A serial port used as a byte stream (a cts_write_cb target). */
typedef struct serial {
  uint16_t base;
  bool dead;       /**< stopped accepting bytes within the bound: later bytes are dropped */
  uint64_t sent;   /**< bytes handed to the UART */
  uint64_t lost;   /**< bytes dropped (port dead) */
  uint64_t waits;  /**< times the UART was busy when a byte was ready */
  uint64_t cycles; /**< TSC cycles spent in serial_write(), to tell tracing from I/O */
} serial_t;

/** Busy-wait bound per byte: a port whose transmitter stays busy this long is declared
 *  dead for the rest of the run, so a host that stops reading costs the kernel at most this
 *  much once per port (docs/unikernel.md). */
#define SERIAL_STALL_US 20000u

void serial_init(serial_t *s, uint16_t base);
/** Writes @p len bytes. Returns 0, or -1 if the port is (or became) dead: the bytes not
 *  sent are counted in s->lost. Matches cts_write_cb (user_data = the serial_t). */
int serial_write(void *s, const void *buf, size_t len);
void serial_puts(serial_t *s, const char *str);
void serial_putu(serial_t *s, uint64_t v);

/** Calibrates the TSC against the PIT (about 10 ms). Call once before clock_ns(). */
void clock_init(void);
/** Nanoseconds since clock_init() (TSC-based, monotonic on one CPU). */
uint64_t clock_ns(void);
/** The CMOS real-time clock at clock_init(), in seconds since the Unix epoch (UTC). */
uint64_t clock_boot_epoch_s(void);
/** TSC counts per microsecond, as calibrated. */
uint64_t clock_tsc_per_us(void);

/** Ends the QEMU run with exit status (code << 1) | 1 (isa-debug-exit at port 0xf4); halts
 *  forever on a machine without the device. */
__attribute__((noreturn)) void machine_exit(uint8_t code);

#endif /* UNIKERNEL_HW_H */
