// SPDX-License-Identifier: Apache-2.0
/*
 * The cgroup v1 devices hierarchy as devgated reaches it: its mount (found
 * by the super options in mountinfo, the last one this namespace can reach)
 * and a process's cgroup in it. It reads the kernel's view only: it never
 * writes a devices list; the v1 layer of gate/ does.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "cgroup.h"
#include "cgroup1.h"
#include "cgv1.h"
#include "cleanup.h"
#include "mountinfo.h"
#include "util.h"

int cgroup1_mountinfo_find(const char *text, bool (*usable)(const char *path), char **ret)
{
	int r = mountinfo_find_cgroup1(text, "devices", usable, ret);

	return r == -ENOENT ? -ENOMEDIUM : r;
}

/* The path reaches a v1 hierarchy with the devices files, not something on top. */
static bool reachable(const char *path)
{
	struct statfs st;
	char list[PATH_MAX];

	if (statfs(path, &st) < 0 || st.f_type != CGROUP_SUPER_MAGIC)
		return false;
	if (snprintf(list, sizeof(list), "%s/devices.list", path) >= (int)sizeof(list))
		return false;
	return access(list, F_OK) == 0;
}

int cg1root_open(struct cg1root *ret)
{
	auto_free char *text = NULL, *mnt = NULL;
	int r, fd;

	r = read_file_at(AT_FDCWD, "/proc/self/mountinfo", (size_t)4 * 1024 * 1024, &text, NULL);
	if (r < 0)
		return r;
	r = cgroup1_mountinfo_find(text, reachable, &mnt);
	if (r < 0)
		return r;
	fd = open(mnt, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ret->mount = TAKE_PTR(mnt);
	ret->fd = fd;
	return 0;
}

void cg1root_close(struct cg1root *r)
{
	free(r->mount);
	r->mount = NULL;
	r->fd = safe_close(r->fd);
}

int cgroup1_devices_parse(const char *text, char **ret)
{
	return cgv1_devices_parse(text, ret);
}

int cgroup1_devices_of_pid(pid_t pid, char **ret)
{
	auto_free char *text = NULL;
	int r = proc_cgroup_read(pid, &text);

	return r < 0 ? r : cgroup1_devices_parse(text, ret);
}
