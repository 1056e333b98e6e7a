// SPDX-License-Identifier: Apache-2.0
/*
 * Where a container's CPUs are, in NUMA terms, so that a counted grant can
 * pick GPUs near them. It reads the cgroup's cpuset or the process's
 * affinity and describes the result in words for the reply; it decides
 * nothing (lease/alloc.c picks).
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cleanup.h"
#include "topo.h"
#include "util.h"

static int cgroup_cpus(int cgfd, struct dg_cpuset *ret)
{
	auto_close int fd = cgfd >= 0 ? openat(cgfd, "cpuset.cpus.effective", O_RDONLY | O_CLOEXEC)
				      : -1;
	auto_free char *text = NULL;
	int r;

	if (fd < 0)
		return -ENOENT;
	r = read_fd_full(fd, (size_t)64 * 1024, &text, NULL);
	if (r < 0)
		return r;
	r = cpulist_parse(text, ret);
	return r < 0 || cpuset_empty(ret) ? -EINVAL : 0;
}

static int affinity_cpus(pid_t pid, struct dg_cpuset *ret)
{
	cpu_set_t set;

	memset(ret, 0, sizeof(*ret));
	if (pid <= 0)
		return -ESRCH;
	if (sched_getaffinity(pid, sizeof(set), &set) < 0)
		return -errno;
	for (unsigned int c = 0; c < CPU_SETSIZE && c < DG_MAX_CPUS; c++) {
		if (CPU_ISSET(c, &set))
			ret->bits[c / 64] |= UINT64_C(1) << (c % 64);
	}
	return 0;
}

void topo_describe(const struct dg_numa *numa, const struct dg_cpuset *cpus, const char *source,
		   struct alloc_cpus *ret)
{
	char list[64], nodes[64];

	cpulist_format(cpus, list, sizeof(list));
	ret->node = numa_node_of(numa, cpus, nodes, sizeof(nodes));
	if (ret->node >= 0)
		snprintf(ret->where, sizeof(ret->where),
			 "the container's CPUs (%s%s) are on node %d", list, source, ret->node);
	else if (nodes[0])
		snprintf(ret->where, sizeof(ret->where),
			 "the container's CPUs (%s%s) span nodes %s, no preference", list, source,
			 nodes);
	else
		snprintf(ret->where, sizeof(ret->where),
			 "the container's CPUs (%s%s) are on no NUMA node the host lists", list,
			 source);
}

void topo_container_cpus(const char *host_root, const struct target *t, struct alloc_cpus *ret)
{
	struct dg_numa numa;
	struct dg_cpuset cpus;
	const char *source = "";

	ret->node = -1;
	if (numa_read(host_root, &numa) < 0 || numa.n_present == 0) {
		snprintf(ret->where, sizeof(ret->where), "the host lists no NUMA nodes");
		return;
	}
	if (cgroup_cpus(t->cgfd, &cpus) < 0) {
		/* The controller is off for its cgroup: the scheduler's mask still says. */
		source = ", by affinity: no cpuset controller";
		if (affinity_cpus(t->pid, &cpus) < 0) {
			snprintf(ret->where, sizeof(ret->where),
				 "the container's CPUs are not known, no preference");
			return;
		}
	}
	topo_describe(&numa, &cpus, source, ret);
}
