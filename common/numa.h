/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NUMA topology under a host root: which CPUs each node has, and which node
 * a set of CPUs (a container's cpuset) lies on. Read from sysfs
 * (sys/devices/system/node/nodeN/cpulist), so a fixture can stand in.
 */
#ifndef DEVGATE_NUMA_H
#define DEVGATE_NUMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu.h"

#define DG_MAX_CPUS 1024

struct dg_cpuset {
	uint64_t bits[DG_MAX_CPUS / 64];
};

/* Parses a kernel CPU list ("0-3,8,10-11\n"); an empty list is an empty set. */
int cpulist_parse(const char *text, struct dg_cpuset *ret);
/* Formats s as a CPU list ("0-3,8"); "" when empty. */
void cpulist_format(const struct dg_cpuset *s, char *buf, size_t len);
bool cpuset_empty(const struct dg_cpuset *s);

struct dg_numa {
	struct dg_cpuset cpus[DG_MAX_NUMA];
	bool present[DG_MAX_NUMA];
	unsigned int n_present;
};

/*
 * Reads the nodes that sys/devices/system/node/online lists under host_root;
 * none is not an error (no NUMA in sysfs).
 */
int numa_read(const char *host_root, struct dg_numa *ret);

/*
 * The node holding every CPU of s, or -1 when they span nodes or lie on none.
 * nodes (may be NULL) gets the nodes they touch: "0,1".
 */
int numa_node_of(const struct dg_numa *n, const struct dg_cpuset *s, char *nodes, size_t len);

#endif
