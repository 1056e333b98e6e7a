/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Who still holds a revoked device. Device programs decide at open(), so a
 * process that opened a GPU before the revoke keeps using it through its
 * descriptor or mapping; revoke reports these holders and, asked to, ends
 * them.
 */
#ifndef DEVGATE_HOLDERS_H
#define DEVGATE_HOLDERS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "gpu.h"

struct cgroot;

#define HOLDERS_MAX 64

struct holder {
	pid_t pid;
	char comm[16];
	struct dg_node node; /* the first of the nodes it holds */
};

/*
 * Processes of the cgroup (cgfd) and its descendants with a descriptor or
 * a mapping on one of nodes (by device number). Returns how many were
 * found, at most max. Moves cgfd's file offset (its entries are read).
 */
size_t holders_find(int cgfd, const struct dg_node *nodes, size_t n, struct holder *out,
		    size_t max);
/*
 * Sends sig to each holder that is still in the cgroup (cgroup_path in root's
 * hierarchy, the v1 devices one on a host without v2, or below it), through a
 * pidfd so a reused PID is never hit. Returns how many were signalled.
 */
size_t holders_signal(const struct cgroot *root, const struct holder *h, size_t n,
		      const char *cgroup_path, int sig);

#endif
