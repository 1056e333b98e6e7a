/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The address a TCP listener binds, as devgate.conf and the command line
 * write it (metrics-listen): checked by core/config.c when it reads the
 * setting, used by metrics/metrics_http.c when it serves.
 */
#ifndef DEVGATE_LISTEN_ADDR_H
#define DEVGATE_LISTEN_ADDR_H

#include <sys/socket.h>

/*
 * Parses "127.0.0.1:9400" or "[::1]:9400": numeric addresses only (no host
 * names), port 1 to 65535. 0 with *ret and *ret_len set, or -EINVAL.
 */
int listen_addr_parse(const char *s, struct sockaddr_storage *ret, socklen_t *ret_len);

#endif
