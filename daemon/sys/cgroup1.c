// SPDX-License-Identifier: Apache-2.0
/*
 * The cgroup v1 devices hierarchy as devgated reaches it: its mount (found
 * by the super options in mountinfo, the last one this namespace can reach)
 * and a process's cgroup in it, and who is in a subtree of it. It reads the
 * kernel's view only: it never writes a devices list; the v1 layer of gate/
 * does.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
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

int cgroup1_open_in(const struct cg1root *root, const char *path, const char *file, int flags)
{
	struct open_how how = {
		.flags = (uint64_t)flags | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
			   RESOLVE_NO_XDEV,
	};
	char rel[4096];
	long fd;

	while (*path == '/')
		path++;
	if (snprintf(rel, sizeof(rel), "%s%s%s", *path ? path : ".", file ? "/" : "",
		     file ? file : "") >= (int)sizeof(rel))
		return -ENAMETOOLONG;
	fd = syscall(SYS_openat2, root->fd, rel, &how, sizeof(how));
	return fd < 0 ? -errno : (int)fd;
}

/* Calls each on every PID in the cgroup.procs at path; stops at its first non-zero. */
static int procs_each(const struct cg1root *root, const char *path,
		      int (*each)(pid_t pid, void *ctx), void *ctx)
{
	auto_close int fd = cgroup1_open_in(root, path, "cgroup.procs", O_RDONLY);
	auto_free char *text = NULL;
	int r;

	if (fd == -ENOENT)
		return 0; /* removed meanwhile */
	if (fd < 0)
		return fd;
	r = read_fd_full(fd, (size_t)4 * 1024 * 1024, &text, NULL);
	if (r < 0)
		return r;
	for (char *line = text, *eol; line && *line; line = eol ? eol + 1 : NULL) {
		uint32_t pid;

		eol = strchr(line, '\n');
		if (eol)
			*eol = '\0';
		if (parse_u32(line, &pid) < 0 || pid == 0 || pid > INT32_MAX)
			return -EBADMSG;
		r = each((pid_t)pid, ctx);
		if (r != 0)
			return r;
	}
	return 0;
}

int cgroup1_procs_walk(const struct cg1root *root, const char *path, int depth,
		       int (*each)(pid_t pid, void *ctx), void *ctx)
{
	int fd, r = procs_each(root, path, each, ctx);
	struct dirent *e;
	DIR *dir;

	if (r != 0)
		return r;
	if (depth > CGROUP1_DEPTH)
		return -ELOOP;
	fd = cgroup1_open_in(root, path, NULL, O_RDONLY | O_DIRECTORY);
	if (fd == -ENOENT)
		return 0;
	if (fd < 0)
		return fd;
	dir = fdopendir(fd);
	if (!dir) {
		r = -errno;
		close(fd);
		return r;
	}
	while (r == 0 && (e = readdir(dir))) {
		auto_free char *sub = NULL;

		if (e->d_type != DT_DIR || e->d_name[0] == '.')
			continue;
		if (asprintf(&sub, "%s/%s", strcmp(path, "/") ? path : "", e->d_name) < 0)
			r = -ENOMEM;
		else
			r = cgroup1_procs_walk(root, sub, depth + 1, each, ctx);
	}
	closedir(dir);
	return r;
}

/* The path of the line "ID:CONTROLLERS:" of text (len of that prefix), or NULL. */
static const char *line_path(const char *text, const char *prefix, size_t len)
{
	for (const char *l = text; l && *l;) {
		if (strncmp(l, prefix, len) == 0)
			return l + len;
		l = strchr(l, '\n');
		l = l ? l + 1 : NULL;
	}
	return NULL;
}

int cgroup1_within(const char *outer, const char *inner)
{
	for (const char *l = outer; l && *l;) {
		const char *c1 = strchr(l, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		const char *eol = strchr(l, '\n'), *p;
		size_t plen, want;

		if (!c2 || (eol && c2 > eol))
			return -EBADMSG;
		want = (size_t)((eol ? eol : c2 + strlen(c2)) - (c2 + 1));
		/* v2's line and devices itself are not the witnesses; "/" claims nothing. */
		if (strncmp(l, "0::", 3) != 0 && !memmem(c1, (size_t)(c2 - c1), "devices", 7) &&
		    !(want == 1 && c2[1] == '/')) {
			p = line_path(inner, l, (size_t)(c2 + 1 - l));
			plen = p ? strcspn(p, "\n") : 0;
			if (!p || plen < want || strncmp(p, c2 + 1, want) != 0 ||
			    (plen > want && p[want] != '/'))
				return 0;
		}
		l = eol ? eol + 1 : NULL;
	}
	return 1;
}
