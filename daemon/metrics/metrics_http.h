/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The optional HTTP endpoint for Prometheus: libmicrohttpd driven by
 * devgated's epoll loop (its epoll fd is in ours), so no threads.
 */
#ifndef DEVGATE_METRICS_HTTP_H
#define DEVGATE_METRICS_HTTP_H

#include <sys/socket.h>

#include "core/daemon.h"

struct metrics_http;

/* Serves GET /metrics on listen ("ADDR:PORT", "[ADDR6]:PORT"); sets d->http. */
int metrics_http_start(struct daemon *d, const char *listen, struct dg_error *err);
/* The endpoint's epoll fd for devgated's loop; -1 when not serving. */
int metrics_http_fd(const struct metrics_http *h);
/* Longest wait before metrics_http_run must run, in ms; -1: none. */
int metrics_http_timeout(struct metrics_http *h);
void metrics_http_run(struct metrics_http *h);
void metrics_http_free(struct metrics_http *h);

/* "127.0.0.1:9400" or "[::1]:9400"; numeric addresses only, port 1-65535. */
int metrics_parse_listen(const char *s, struct sockaddr_storage *ret, socklen_t *ret_len);

#endif
