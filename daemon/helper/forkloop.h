/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Forking node helpers, shared by the zygote (in devgated-node or forked
 * from devgated) and by devgated when it has no zygote. Nothing but libc:
 * it is built into the static devgated-node too.
 */
#ifndef DEVGATE_FORKLOOP_H
#define DEVGATE_FORKLOOP_H

#include <stdbool.h>
#include <sys/types.h>

/* The zygote's own end of its socket to devgated. */
#define FORKLOOP_FD 3

/* A forked child and how devgated reaches it. */
struct child {
	pid_t pid;
	int sock;  /* devgated's end of the child's socket */
	int pidfd; /* -1 where the kernel has no pidfd_open */
	bool ours; /* devgated's own child (forked without the zygote): waitpid it */
};

/* Runs in every child, with its end of the socket; never returns. */
typedef void (*zygote_child_fn)(int sock);

/* fork() with a socket between the two; *sock is this side's end. 0 in the child. */
pid_t forkloop_paired(int *sock);
/* Forks a child running fn; 0 or -errno. */
int forkloop_child(zygote_child_fn fn, struct child *ret);
/*
 * The zygote's loop on FORKLOOP_FD: one child per one-byte request, sent
 * back as its pid, socket and pidfd. Exits when devgated hangs up.
 */
void forkloop_serve(zygote_child_fn fn) __attribute__((noreturn));

#endif
