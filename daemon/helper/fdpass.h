/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One message with descriptors over a unix socket (SCM_RIGHTS): devgated to
 * its node helpers, and the zygote to devgated. No allocation and no
 * logging, so a helper may use it once it is confined.
 */
#ifndef DEVGATE_FDPASS_H
#define DEVGATE_FDPASS_H

#include <stddef.h>

/*
 * Descriptors in one message: a pidfd, a root, and a detached mount for each
 * node (user-namespaced containers) or driver file (helper.h checks). The
 * kernel takes up to 253 (SCM_MAX_FD).
 */
#define FDPASS_MAX 240

/* Sends len bytes of buf with n (1 to FDPASS_MAX) descriptors; 0 or -errno. */
int fds_send(int sock, const void *buf, size_t len, const int *fds, size_t n);
/*
 * Receives a message of exactly len bytes into buf and its descriptors
 * (close-on-exec) into fds; how many came, -EPIPE for a short message or
 * end of file, or -errno.
 */
int fds_recv(int sock, void *buf, size_t len, int fds[FDPASS_MAX]);

#endif
