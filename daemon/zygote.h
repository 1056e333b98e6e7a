/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The zygote: a small process forked at start, before devgated loads its
 * BPF objects and grows, whose one job is to fork node helpers for it. So
 * devgated itself never forks per request: no copy of its page tables, and
 * no copy-on-write faults in devgated while a helper lives. Helpers stay
 * single-use; the zygote never reads anything but a one-byte request from
 * devgated, and dies with it.
 */
#ifndef DEVGATE_ZYGOTE_H
#define DEVGATE_ZYGOTE_H

#include <stdbool.h>
#include <sys/types.h>

/* A forked child and how devgated reaches it. */
struct child {
	pid_t pid;
	int sock;  /* devgated's end of the child's socket */
	int pidfd; /* -1 where the kernel has no pidfd_open */
	bool ours; /* devgated's own child (forked without the zygote): waitpid it */
};

/* Runs in every child, with its end of the socket; never returns. */
typedef void (*zygote_child_fn)(int sock);

/* Forks the zygote; -errno (the caller then forks helpers itself). */
int zygote_start(zygote_child_fn fn);
void zygote_stop(void);
/*
 * Asks the zygote for the next child and returns at once: it forks while
 * devgated goes on, and child_spawn() then only collects it.
 */
void child_order(void);
/* Forks a child running fn, through the zygote or, if it is gone, directly. */
int child_spawn(struct child *ret);
/* Ends it: SIGKILL if it still runs (a helper replies as its last act); reaps it if ours. */
void child_end(struct child *c);

#endif
