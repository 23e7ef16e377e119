/* SPDX-License-Identifier: MIT */
#include "hw.h"

/* ---- serial ports (16550) ----------------------------------------------------------- */

void serial_init(serial_t *s, uint16_t base) {
  *s = (serial_t){.base = base};
  outb(base + 1, 0x00); /* no interrupts: the kernel polls */
  outb(base + 3, 0x80); /* DLAB: divisor follows */
  outb(base + 0, 0x01); /* 115200 baud */
  outb(base + 1, 0x00);
  outb(base + 3, 0x03); /* 8N1 */
  outb(base + 2, 0xC7); /* FIFO on, cleared, 14-byte threshold */
  outb(base + 4, 0x03); /* DTR, RTS */
}

/* The transmitter holding register is empty (line status bit 5). */
static bool tx_ready(uint16_t base) {
  return (inb(base + 5) & 0x20) != 0;
}

int serial_write(void *user_data, const void *buf, size_t len) {
  serial_t *s = user_data;
  const uint8_t *p = buf;
  const uint64_t t0 = rdtsc();
  for (size_t i = 0; i < len; i++) {
    if (s->dead) {
      s->lost += len - i;
      s->cycles += rdtsc() - t0;
      return -1;
    }
    if (!tx_ready(s->base)) {
      s->waits++;
      const uint64_t limit = rdtsc() + SERIAL_STALL_US * clock_tsc_per_us();
      while (!tx_ready(s->base)) {
        if (rdtsc() > limit) {
          s->dead = true;
          break;
        }
        __asm__ volatile("pause");
      }
      if (s->dead) continue;
    }
    outb(s->base, p[i]);
    s->sent++;
  }
  s->cycles += rdtsc() - t0;
  return 0;
}

void serial_puts(serial_t *s, const char *str) {
  size_t n = 0;
  while (str[n]) n++;
  serial_write(s, str, n);
}

void serial_putu(serial_t *s, uint64_t v) {
  char digits[21];
  size_t n = sizeof digits;
  do {
    digits[--n] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  serial_write(s, digits + n, sizeof digits - n);
}

/* ---- clock ---------------------------------------------------------------------------- */

static uint64_t tsc_base, tsc_per_us = 1000, boot_epoch_s;

/* PIT channel 2 counts down 11932 ticks of 1.193182 MHz (10 ms) with its gate on; the TSC
 * advance over that time gives its rate. */
static uint64_t calibrate_tsc(void) {
  const uint16_t ticks = 11932;
  outb(0x61, (uint8_t)((inb(0x61) & 0xFC) | 0x01)); /* gate on, speaker off */
  outb(0x43, 0xB0);                                 /* channel 2, lo/hi, mode 0 */
  outb(0x42, ticks & 0xFF);
  outb(0x42, ticks >> 8);
  const uint8_t g = inb(0x61);
  outb(0x61, g & 0xFE); /* restart the count on the gate's rising edge */
  outb(0x61, g | 0x01);
  const uint64_t t0 = rdtsc();
  uint64_t spins = 0;
  while (!(inb(0x61) & 0x20) && ++spins < 100000000u) { /* OUT2 goes high at zero */
  }
  const uint64_t dt = rdtsc() - t0;
  const uint64_t rate = dt / 10000u;
  return rate ? rate : 1;
}

static uint8_t cmos(uint8_t reg) {
  outb(0x70, reg);
  return inb(0x71);
}

static uint64_t bcd(uint8_t v, bool is_bcd) {
  return is_bcd ? (uint64_t)(v >> 4) * 10 + (v & 15) : v;
}

/* Days from 1970-01-01 to y-m-d (proleptic Gregorian). */
static uint64_t days_from_civil(uint64_t y, uint64_t m, uint64_t d) {
  y -= m <= 2;
  const uint64_t era = y / 400, yoe = y - era * 400;
  const uint64_t doy = (153 * (m + (m > 2 ? (uint64_t)-3 : 9)) + 2) / 5 + d - 1;
  const uint64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

static uint64_t read_rtc(void) {
  /* An update in progress lasts under 2 ms; the bound keeps a missing RTC from hanging. */
  for (uint32_t spins = 0; (cmos(0x0A) & 0x80) && spins < 10000000u; spins++) {}
  const bool is_bcd = !(cmos(0x0B) & 0x04);
  const uint64_t sec = bcd(cmos(0x00), is_bcd), min = bcd(cmos(0x02), is_bcd);
  const uint64_t hour = bcd(cmos(0x04) & 0x7F, is_bcd), day = bcd(cmos(0x07), is_bcd);
  const uint64_t mon = bcd(cmos(0x08), is_bcd), year = 2000 + bcd(cmos(0x09), is_bcd);
  return days_from_civil(year, mon, day) * 86400 + hour * 3600 + min * 60 + sec;
}

void clock_init(void) {
  boot_epoch_s = read_rtc();
  /* A calibration can only come out too high (the vCPU descheduled while the PIT runs on,
   * on a busy host): the lowest of a few is the best. */
  tsc_per_us = calibrate_tsc();
  for (int i = 0; i < 4; i++) {
    const uint64_t r = calibrate_tsc();
    if (r < tsc_per_us) tsc_per_us = r;
  }
  tsc_base = rdtsc();
}

uint64_t clock_ns(void) {
  return (rdtsc() - tsc_base) * 1000u / tsc_per_us;
}

uint64_t clock_boot_epoch_s(void) {
  return boot_epoch_s;
}

uint64_t clock_tsc_per_us(void) {
  return tsc_per_us;
}

void machine_exit(uint8_t code) {
  outb(0xF4, code);
  for (;;) __asm__ volatile("cli; hlt");
}
