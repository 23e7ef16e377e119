/* SPDX-License-Identifier: MIT */
/* The network commands (collect, fetch) and the option values they share. */
#ifndef CTS_CLI_CMD_NET_H
#define CTS_CLI_CMD_NET_H

#include <stdbool.h>
#include <stdint.h>

int cmd_collect(int argc, char **argv);
int cmd_fetch(int argc, char **argv);

/* "1.5" seconds -> 1500 ms; 0 allowed; at most a day. Returns false if not a duration. */
bool cli_net_parse_seconds(const char *s, uint32_t *ms);
/* "4096", "64k", "100M", "2G" (binary units) -> bytes. Returns false if not a size. */
bool cli_net_parse_size(const char *s, uint64_t *bytes);
/* A positive decimal count, at most max. */
bool cli_net_parse_count(const char *s, unsigned max, unsigned *out);

#endif /* CTS_CLI_CMD_NET_H */
