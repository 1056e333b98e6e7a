// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <bpf/bpf.h>

#include "cleanup.h"
#include "keeper.h"
#include "log.h"

#define KEEP_PER_CGROUP 60 /* below the kernel's 64 programs per cgroup */
#define KEEP_CGROUPS 64

int keeper_init(struct keeper *k, int cgroot_fd, const char *pin_root)
{
	char name[200];
	size_t i;

	snprintf(name, sizeof(name), "%s", pin_root);
	for (i = 0; name[i]; i++) {
		if (name[i] == '/')
			name[i] = '_';
	}
	k->cgroot_fd = cgroot_fd;
	snprintf(k->dir, sizeof(k->dir), "devgate.keep/%s", name);
	return 0;
}

/* Made when first needed, so a devgated that wraps nothing leaves nothing. */
static int keeper_mkdirs(const struct keeper *k)
{
	if (mkdirat(k->cgroot_fd, "devgate.keep", 0755) < 0 && errno != EEXIST)
		return -errno;
	if (mkdirat(k->cgroot_fd, k->dir, 0755) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* Programs attached to keeper cgroup kN, or -errno (-ENOENT: no such cgroup). */
static int held(const struct keeper *k, unsigned int n, uint32_t *ids, uint32_t *count, int *ret_fd)
{
	LIBBPF_OPTS(bpf_prog_query_opts, q, .prog_ids = ids, .prog_cnt = 64);
	char path[300];
	int fd;

	snprintf(path, sizeof(path), "%s/k%u", k->dir, n);
	fd = openat(k->cgroot_fd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (bpf_prog_query_opts(fd, BPF_CGROUP_DEVICE, &q) < 0) {
		int r = -errno;

		close(fd);
		return r;
	}
	*count = q.prog_cnt;
	*ret_fd = fd;
	return 0;
}

int keeper_hold(const struct keeper *k, int prog_fd, uint32_t prog_id)
{
	int r = keeper_mkdirs(k);

	if (r < 0)
		return r;
	for (unsigned int n = 0; n < KEEP_CGROUPS; n++) {
		LIBBPF_OPTS(bpf_prog_attach_opts, opts, .flags = BPF_F_ALLOW_MULTI);
		uint32_t ids[64], count = 0;
		auto_close int fd = -1;
		char path[300];
		r = held(k, n, ids, &count, &fd);

		if (r == -ENOENT) {
			snprintf(path, sizeof(path), "%s/k%u", k->dir, n);
			if (mkdirat(k->cgroot_fd, path, 0755) < 0 && errno != EEXIST)
				return -errno;
			r = held(k, n, ids, &count, &fd);
		}
		if (r < 0)
			return r;
		for (uint32_t i = 0; i < count; i++) {
			if (ids[i] == prog_id)
				return 0;
		}
		if (count >= KEEP_PER_CGROUP)
			continue;
		return bpf_prog_attach_opts(prog_fd, fd, BPF_CGROUP_DEVICE, &opts) < 0 ? -errno : 0;
	}
	return -ENOSPC;
}

void keeper_release(const struct keeper *k, uint32_t prog_id)
{
	for (unsigned int n = 0; n < KEEP_CGROUPS; n++) {
		uint32_t ids[64], count = 0;
		auto_close int fd = -1, prog_fd = -1;
		char path[300];

		if (held(k, n, ids, &count, &fd) < 0)
			continue;
		for (uint32_t i = 0; i < count; i++) {
			if (ids[i] != prog_id)
				continue;
			prog_fd = bpf_prog_get_fd_by_id(prog_id);
			if (prog_fd < 0 || bpf_prog_detach2(prog_fd, fd, BPF_CGROUP_DEVICE) < 0)
				log_warning_errno(errno, "keeper: cannot let go of program %u: %m",
						  prog_id);
			count--;
			break;
		}
		if (count == 0) {
			snprintf(path, sizeof(path), "%s/k%u", k->dir, n);
			(void)unlinkat(k->cgroot_fd, path, AT_REMOVEDIR);
		}
	}
	/* Gone once empty; a cgroup with children refuses, which is fine. */
	(void)unlinkat(k->cgroot_fd, k->dir, AT_REMOVEDIR);
}
