// SPDX-License-Identifier: Apache-2.0
/*
 * The host's NUMA nodes from sysfs under a host root, CPU lists parsed into
 * sets, and the one node a set of CPUs lies on, if any (see numa.h).
 * Reading and arithmetic only; lease/alloc.c decides what to pick.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cleanup.h"
#include "numa.h"
#include "util.h"

static void cpu_set(struct dg_cpuset *s, unsigned int cpu)
{
	s->bits[cpu / 64] |= UINT64_C(1) << (cpu % 64);
}

static bool cpu_isset(const struct dg_cpuset *s, unsigned int cpu)
{
	return s->bits[cpu / 64] >> (cpu % 64) & 1;
}

bool cpuset_empty(const struct dg_cpuset *s)
{
	for (size_t i = 0; i < DG_MAX_CPUS / 64; i++) {
		if (s->bits[i])
			return false;
	}
	return true;
}

static int cpu_number(const char **p, unsigned int *ret)
{
	char *end;
	unsigned long v;

	if (**p < '0' || **p > '9')
		return -EINVAL;
	errno = 0;
	v = strtoul(*p, &end, 10);
	if (errno || v >= DG_MAX_CPUS)
		return -ERANGE;
	*p = end;
	*ret = (unsigned int)v;
	return 0;
}

int cpulist_parse(const char *text, struct dg_cpuset *ret)
{
	const char *p = text;

	memset(ret, 0, sizeof(*ret));
	while (*p && *p != '\n') {
		unsigned int lo, hi;
		int r = cpu_number(&p, &lo);

		if (r < 0)
			return r;
		hi = lo;
		if (*p == '-') {
			p++;
			r = cpu_number(&p, &hi);
			if (r < 0 || hi < lo)
				return r < 0 ? r : -EINVAL;
		}
		for (unsigned int c = lo; c <= hi; c++)
			cpu_set(ret, c);
		if (*p == ',')
			p++;
		else if (*p && *p != '\n')
			return -EINVAL;
	}
	return *p == '\n' && p[1] ? -EINVAL : 0;
}

void cpulist_format(const struct dg_cpuset *s, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (unsigned int c = 0; c < DG_MAX_CPUS && off < len; c++) {
		unsigned int end = c;

		if (!cpu_isset(s, c))
			continue;
		while (end + 1 < DG_MAX_CPUS && cpu_isset(s, end + 1))
			end++;
		if (end == c)
			off += (size_t)snprintf(buf + off, len - off, "%s%u", off ? "," : "", c);
		else
			off += (size_t)snprintf(buf + off, len - off, "%s%u-%u", off ? "," : "", c,
						end);
		c = end;
	}
}

/* A whole small sysfs file under the root, NUL-terminated. */
static int read_small(int rootfd, const char *path, char **ret)
{
	auto_close int fd = open_in_root(rootfd, path, O_RDONLY, 0);

	if (fd < 0)
		return fd;
	return read_fd_full(fd, (size_t)64 * 1024, ret, NULL);
}

int numa_read(const char *host_root, struct dg_numa *ret)
{
	auto_close int rootfd = open(host_root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	auto_free char *online = NULL;
	struct dg_cpuset nodes;

	memset(ret, 0, sizeof(*ret));
	if (rootfd < 0)
		return -errno;
	/* The online list, not a probe of every name: a grant pays for this. */
	if (read_small(rootfd, "sys/devices/system/node/online", &online) < 0 ||
	    cpulist_parse(online, &nodes) < 0)
		return 0;
	for (unsigned int n = 0; n < DG_MAX_NUMA; n++) {
		auto_free char *text = NULL;
		char path[64];

		if (!cpu_isset(&nodes, n))
			continue;
		snprintf(path, sizeof(path), "sys/devices/system/node/node%u/cpulist", n);
		if (read_small(rootfd, path, &text) < 0 || cpulist_parse(text, &ret->cpus[n]) < 0)
			continue;
		ret->present[n] = true;
		ret->n_present++;
	}
	return 0;
}

int numa_node_of(const struct dg_numa *n, const struct dg_cpuset *s, char *nodes, size_t len)
{
	int only = -1, touched = 0;
	size_t off = 0;

	if (nodes && len)
		nodes[0] = '\0';
	for (unsigned int node = 0; node < DG_MAX_NUMA; node++) {
		bool hit = false;

		for (size_t i = 0; n->present[node] && i < DG_MAX_CPUS / 64 && !hit; i++)
			hit = (n->cpus[node].bits[i] & s->bits[i]) != 0;
		if (!hit)
			continue;
		only = (int)node;
		touched++;
		if (nodes && off < len)
			off += (size_t)snprintf(nodes + off, len - off, "%s%u", off ? "," : "",
						node);
	}
	return touched == 1 ? only : -1;
}
