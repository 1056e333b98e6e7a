// SPDX-License-Identifier: Apache-2.0
/*
 * The cgroup v2 hierarchy as devgated reaches it: which mount to use (the
 * one mountinfo names last that this namespace can reach), cgroups opened
 * by path or by id, a cgroup's id, path and whether it still has processes;
 * on a host with cgroup v1 alone, the same for the v1 devices hierarchy.
 * It reads the kernel's view only: it never creates, moves into or writes
 * to a cgroup.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "proccg.h"
#include "cgroup.h"
#include "cleanup.h"
#include "util.h"

int cgroot_open(struct cgroot *ret, const char *root, struct dg_error *err)
{
	auto_free char *text = NULL, *mnt = NULL;
	int r, fd;

	if (root && !mountinfo_is_cgroup2(root)) {
		dg_error_set(err, DG_E_CONFIG, ENOTDIR, "cgroup-root %s is not a cgroup v2 mount",
			     root);
		dg_error_hint(err, "leave cgroup-root unset to find the mount from mountinfo");
		return -ENOTDIR;
	}
	r = read_file_at(AT_FDCWD, "/proc/self/mountinfo", (size_t)4 * 1024 * 1024, &text, NULL);
	if (r < 0)
		return dg_error_set(err, DG_E_KERNEL, r, "cannot read /proc/self/mountinfo: %s",
				    strerror(-r));
	r = root ? ((mnt = strdup(root)) ? 0 : -ENOMEM)
		 : mountinfo_find_cgroup2(text, mountinfo_is_cgroup2, &mnt);
	if (r == -ENOENT) {
		dg_error_set(err, DG_E_KERNEL, ENOMEDIUM, "no cgroup v2 hierarchy is mounted");
		dg_error_hint(err, "devgate needs cgroup v2; mount it with "
				   "'mount -t cgroup2 none /sys/fs/cgroup/unified'");
		return -ENOMEDIUM;
	}
	if (r < 0)
		return dg_error_set(err, DG_E_INTERNAL, r, "cannot parse mountinfo");
	fd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return dg_error_set(err, DG_E_KERNEL, errno, "cannot open cgroup v2 mount '%s': %m",
				    mnt);
	ret->mount = TAKE_PTR(mnt);
	ret->fd = fd;
	return 0;
}

int cgroot_open_v1(struct cgroot *ret, const char *mount, int (*path_of)(pid_t pid, char **ret),
		   struct dg_error *err)
{
	int fd = open(mount, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return dg_error_set(err, DG_E_KERNEL, errno,
				    "cannot open the cgroup v1 devices mount '%s': %m", mount);
	ret->mount = strdup(mount);
	if (!ret->mount) {
		close(fd);
		return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	}
	ret->fd = fd;
	ret->v1 = true;
	ret->v1_path_of = path_of;
	return 0;
}

void cgroot_close(struct cgroot *root)
{
	free(root->mount);
	root->mount = NULL;
	root->fd = safe_close(root->fd);
}

int cgroup_open_path(const struct cgroot *root, const char *path, int *ret_fd)
{
	struct open_how how = {
		.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
			   RESOLVE_NO_XDEV,
	};
	const char *rel = path;
	long fd;

	while (*rel == '/')
		rel++;
	fd = syscall(SYS_openat2, root->fd, *rel ? rel : ".", &how, sizeof(how));
	if (fd < 0)
		return -errno;
	*ret_fd = (int)fd;
	return 0;
}

struct cg_handle {
	struct file_handle fh;
	uint64_t id;
};

int cgroup_id_of(int cgfd, uint64_t *ret)
{
	struct cg_handle h = { .fh.handle_bytes = sizeof(uint64_t) };
	int mnt;

	if (name_to_handle_at(cgfd, "", &h.fh, &mnt, AT_EMPTY_PATH) < 0)
		return -errno;
	*ret = h.id;
	return 0;
}

int cgroup_open_id(const struct cgroot *root, uint64_t id, int *ret_fd)
{
	struct cg_handle h = { .fh.handle_bytes = sizeof(uint64_t), .fh.handle_type = 0xfe };
	uint64_t check = 0;
	int fd;

	/* kernfs handles are FILEID_KERNFS (0xfe) carrying the 64-bit id. */
	h.id = id;
	fd = open_by_handle_at(root->fd, &h.fh, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return errno == ESTALE ? -ENOENT : -errno;
	if (cgroup_id_of(fd, &check) < 0 || check != id) {
		close(fd);
		return -ENOENT;
	}
	*ret_fd = fd;
	return 0;
}

int cgroup_path_of(const struct cgroot *root, int cgfd, char **ret)
{
	char link[64], target[PATH_MAX];
	size_t mlen = strlen(root->mount);
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", cgfd);
	n = readlink(link, target, sizeof(target) - 1);
	if (n < 0)
		return -errno;
	target[n] = '\0';
	if (strncmp(target, root->mount, mlen) != 0 || (target[mlen] != '/' && target[mlen]))
		return -EXDEV;
	*ret = strdup(target[mlen] ? target + mlen : "/");
	return *ret ? 0 : -ENOMEM;
}

/* v1: a process in the cgroup at dirfd or below it (v1 cgroups hold processes at any level). */
static int v1_populated(int dirfd, int depth)
{
	auto_free char *procs = NULL;
	struct dirent *e;
	int fd, r = read_file_at(dirfd, "cgroup.procs", 64, &procs, NULL);
	DIR *dir;

	if (r < 0 || procs[0])
		return r < 0 ? r : 1;
	if (depth > 16)
		return -ELOOP;
	fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	dir = fd >= 0 ? fdopendir(fd) : NULL;
	if (!dir) {
		r = -errno;
		if (fd >= 0)
			close(fd);
		return r;
	}
	while (r == 0 && (e = readdir(dir))) {
		int sub;

		if (e->d_type != DT_DIR || e->d_name[0] == '.')
			continue;
		sub = openat(dirfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub < 0)
			continue; /* removed meanwhile */
		r = v1_populated(sub, depth + 1);
		close(sub);
		if (r == -ENOENT || r == -ENODEV)
			r = 0;
	}
	closedir(dir);
	return r;
}

int cgroup_populated(int cgfd)
{
	auto_free char *text = NULL;
	const char *p;
	int r = read_file_at(cgfd, "cgroup.events", 4096, &text, NULL);

	if (r == -ENOENT && faccessat(cgfd, "devices.list", F_OK, 0) == 0)
		return v1_populated(cgfd, 0);
	if (r < 0)
		return r;
	p = strstr(text, "populated ");
	if (!p)
		return -EINVAL;
	return p[10] == '1';
}

int proc_cgroup_read(pid_t pid, char **ret)
{
	char path[64];
	int r;

	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	r = read_file_at(AT_FDCWD, path, (size_t)64 * 1024, ret, NULL);
	return r == -ENOENT ? -ESRCH : r;
}

int cgroup_of_pid(pid_t pid, char **ret)
{
	auto_free char *text = NULL;
	int r = proc_cgroup_read(pid, &text);

	return r < 0 ? r : proc_cgroup_parse(text, ret);
}

int cgroup_of_pid_kept(const struct cgroot *root, pid_t pid, char **ret, char **ret_text)
{
	char *text = NULL;
	int r;

	*ret_text = NULL;
	if (root->v1)
		return root->v1_path_of(pid, ret);
	r = proc_cgroup_read(pid, &text);
	if (r == 0)
		r = proc_cgroup_parse(text, ret);
	*ret_text = text;
	return r;
}

int cgroup_of_pid_in(const struct cgroot *root, pid_t pid, char **ret)
{
	return root->v1 ? root->v1_path_of(pid, ret) : cgroup_of_pid(pid, ret);
}

int cgroup_path_is_ancestor(const char *path, const char *other)
{
	size_t len = strlen(path);

	if (strcmp(path, "/") == 0)
		return 1;
	return strncmp(path, other, len) == 0 && (other[len] == '\0' || other[len] == '/');
}
