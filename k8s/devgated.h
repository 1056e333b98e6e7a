/* SPDX-License-Identifier: Apache-2.0 */
/*
 * devgate-k8s as devgated's read-only client: list (the GPUs and who holds
 * them) and watch (a stream of lease changes, each a reason to list
 * again). Both are open to devgated's socket-group, so the plugin needs
 * no root for them.
 */
#ifndef DEVGATE_K8S_DEVGATED_H
#define DEVGATE_K8S_DEVGATED_H

#include <stddef.h>

#include "devices.h"

#ifdef __cplusplus
extern "C" {
#endif

struct k8s_watch;

/* One list within timeout_s; on failure why says what went wrong. */
int k8s_devgated_list(const char *socket_path, unsigned int timeout_s, struct k8s_devices *ret,
		      char *why, size_t why_len);

/* Opens a watch stream (devgated has answered "watching"). */
int k8s_watch_open(const char *socket_path, unsigned int timeout_s, struct k8s_watch **ret,
		   char *why, size_t why_len);
/* The stream's descriptor, to poll(2) for the next event. */
int k8s_watch_fd(const struct k8s_watch *w);
/*
 * Reads what is there once poll() said so: 0 after an event (or a part
 * of one), -ECONNRESET when devgated closed the stream, another -errno on
 * a broken one. Never blocks for long (the descriptor is non-blocking).
 */
int k8s_watch_read(struct k8s_watch *w);
void k8s_watch_free(struct k8s_watch *w);

#ifdef __cplusplus
}
#endif

#endif
