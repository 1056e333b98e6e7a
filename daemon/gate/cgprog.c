// SPDX-License-Identifier: Apache-2.0
/*
 * A cgroup's device programs as the kernel reports them: the thin layer
 * over BPF_PROG_QUERY, BPF_PROG_ATTACH and BPF_PROG_DETACH that the rest of
 * gate/ uses. It neither knows nor cares which programs are devgate's.
 */
#include <errno.h>
#include <bpf/bpf.h>

#include "cgprog.h"
#include "cleanup.h"

int cgprog_query(int cgfd, bool effective, struct attached *ret)
{
	LIBBPF_OPTS(bpf_prog_query_opts, q, .prog_ids = ret->ids, .prog_cnt = MAX_PROGS);

	ret->n = 0;
	ret->flags = 0;
	if (effective)
		q.query_flags = BPF_F_QUERY_EFFECTIVE;
	if (bpf_prog_query_opts(cgfd, BPF_CGROUP_DEVICE, &q) < 0)
		return -errno;
	ret->n = q.prog_cnt;
	ret->flags = q.attach_flags;
	return 0;
}

bool cgprog_has(const struct attached *a, uint32_t id)
{
	for (uint32_t i = 0; i < a->n; i++) {
		if (a->ids[i] == id)
			return true;
	}
	return false;
}

int cgprog_attach(int prog_fd, int cgfd, uint32_t flags, int replace_fd)
{
	LIBBPF_OPTS(bpf_prog_attach_opts, opts, .flags = flags);

	if (replace_fd >= 0) {
		opts.flags |= BPF_F_REPLACE;
		opts.replace_prog_fd = replace_fd;
	}
	return bpf_prog_attach_opts(prog_fd, cgfd, BPF_CGROUP_DEVICE, &opts) < 0 ? -errno : 0;
}

int cgprog_detach(uint32_t prog_id, int cgfd)
{
	auto_close int fd = bpf_prog_get_fd_by_id(prog_id);

	if (fd < 0)
		return -errno;
	if (bpf_prog_detach2(fd, cgfd, BPF_CGROUP_DEVICE) < 0 && errno != ENOENT)
		return -errno;
	return 0;
}

uint64_t cgprog_digest(const struct attached *a)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */

	for (uint32_t i = 0; i < a->n; i++)
		h = (h ^ a->ids[i]) * 1099511628211ull;
	return ((h ^ a->flags) * 1099511628211ull) | 1; /* never 0 */
}

int cgprog_digest_of(int cgfd, bool effective, uint64_t *ret)
{
	struct attached a = { 0 };
	int r = cgprog_query(cgfd, effective, &a);

	if (r < 0)
		return r;
	*ret = cgprog_digest(&a);
	return 0;
}
