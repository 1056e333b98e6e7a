/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The optional HTTP endpoint for Prometheus: libmicrohttpd driven by
 * devgated's epoll loop (its epoll fd is in ours), so no threads. It serves
 * whatever page its render callback makes; it knows nothing of devgated's
 * state (main.c wires it to view/metrics_page.h).
 */
#ifndef DEVGATE_METRICS_HTTP_H
#define DEVGATE_METRICS_HTTP_H

#include <stddef.h>

#include "errors.h"

struct metrics_http;

/*
 * Makes the page for one GET /metrics: 0 with *ret a malloc'd document of
 * *ret_len bytes (the endpoint frees it), or -errno (the client gets 500).
 */
typedef int (*metrics_http_render_fn)(void *ctx, char **ret, size_t *ret_len);

/*
 * Serves GET /metrics on listen ("ADDR:PORT" or "[ADDR6]:PORT"), calling
 * render(ctx, ...) for each request. 0 with *ret the endpoint, or -errno
 * with err set (a bad address, or one it cannot listen on).
 */
int metrics_http_start(const char *listen, metrics_http_render_fn render, void *ctx,
		       struct metrics_http **ret, struct dg_error *err);
/* The endpoint's epoll fd for devgated's loop; -1 when not serving (h NULL). */
int metrics_http_fd(const struct metrics_http *h);
/* The longest devgated may wait before metrics_http_run must run, in ms; -1: no limit. */
int metrics_http_timeout(struct metrics_http *h);
/* Does whatever work the endpoint has: accepts, reads, answers. h may be NULL. */
void metrics_http_run(struct metrics_http *h);
/* Stops serving and frees h; NULL is fine. */
void metrics_http_free(struct metrics_http *h);

#endif
