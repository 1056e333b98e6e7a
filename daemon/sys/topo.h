/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Where a container's CPUs are: its cgroup's cpuset.cpus.effective, or,
 * where the cpuset controller is not enabled for it, its process's CPU
 * affinity; mapped onto the NUMA nodes of the host root.
 */
#ifndef DEVGATE_TOPO_H
#define DEVGATE_TOPO_H

#include "lease/alloc.h"
#include "numa.h"
#include "target.h"

void topo_container_cpus(const char *host_root, const struct target *t, struct alloc_cpus *ret);

/* The words of the reason, from the CPUs and the source they came from. */
void topo_describe(const struct dg_numa *numa, const struct dg_cpuset *cpus, const char *source,
		   struct alloc_cpus *ret);

#endif
