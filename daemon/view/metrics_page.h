/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Prometheus page of devgated: its counters (metrics/metrics.h), the
 * leases, the GPUs and the BPF device counters of live leases, as one text
 * document. Served by the "metrics" socket operation and by the HTTP
 * endpoint (metrics/metrics_http.h, wired in main.c).
 */
#ifndef DEVGATE_METRICS_PAGE_H
#define DEVGATE_METRICS_PAGE_H

#include <stddef.h>

#include "core/daemon.h"

/*
 * Renders the whole page. On success *ret is a malloc'd, NUL-terminated
 * document of *ret_len bytes and the result is 0; -EINVAL without counters
 * (d->metrics), or -errno when a BPF map cannot be read.
 */
int metrics_render(struct daemon *d, char **ret, size_t *ret_len);

#endif
