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

#include "cgroup1.h"
#include "cleanup.h"
#include "mountinfo.h"
#include "util.h"

/* True when the comma-separated list has the exact word. */
static int list_has(const char *list, size_t len, const char *word)
{
	size_t wlen = strlen(word);
	const char *p = list, *end = list + len;

	while (p < end) {
		const char *comma = memchr(p, ',', (size_t)(end - p));
		size_t n = comma ? (size_t)(comma - p) : (size_t)(end - p);

		if (n == wlen && memcmp(p, word, n) == 0)
			return 1;
		p = comma ? comma + 1 : end;
	}
	return 0;
}

/* 1 when the mountinfo line is a v1 devices hierarchy at its root; fills mnt. */
static int devices_line(const char *line, char mnt[PATH_MAX])
{
	char root[PATH_MAX], fstype[64], opts[1024];
	const char *sep = strstr(line, " - ");

	if (!sep || sscanf(sep, " - %63s %*s %1023s", fstype, opts) != 2)
		return 0;
	if (strcmp(fstype, "cgroup") != 0 || !list_has(opts, strlen(opts), "devices"))
		return 0;
	if (sscanf(line, "%*s %*s %*s %4095s %4095s", root, mnt) != 2 || strcmp(root, "/") != 0)
		return 0;
	mountinfo_unescape(mnt);
	return 1;
}

int cgroup1_mountinfo_find(const char *text, int (*usable)(const char *path), char **ret)
{
	auto_free char *copy = strdup(text);
	auto_free char *found = NULL;
	char *save = NULL;

	if (!copy)
		return -ENOMEM;
	for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char mnt[PATH_MAX];

		/* A later mount may hide an earlier one: the last usable wins. */
		if (!devices_line(line, mnt) || (usable && !usable(mnt)))
			continue;
		free(found);
		found = strdup(mnt);
		if (!found)
			return -ENOMEM;
	}
	if (!found)
		return -ENOMEDIUM;
	*ret = TAKE_PTR(found);
	return 0;
}

/* The path reaches a v1 hierarchy with the devices files, not something on top. */
static int reachable(const char *path)
{
	struct statfs st;
	char list[PATH_MAX];

	if (statfs(path, &st) < 0 || st.f_type != CGROUP_SUPER_MAGIC)
		return 0;
	if (snprintf(list, sizeof(list), "%s/devices.list", path) >= (int)sizeof(list))
		return 0;
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
	const char *line = text;

	while (line && *line) {
		const char *eol = strchr(line, '\n');
		size_t len = eol ? (size_t)(eol - line) : strlen(line);
		const char *c1 = memchr(line, ':', len);
		const char *c2 = c1 ? memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - line)) : NULL;

		/* "ID:CONTROLLERS:PATH"; v2's "0::PATH" has no controllers. */
		if (c2 && list_has(c1 + 1, (size_t)(c2 - c1 - 1), "devices")) {
			size_t plen = len - (size_t)(c2 + 1 - line);

			if (plen == 0 || c2[1] != '/')
				return -EINVAL;
			*ret = strndup(c2 + 1, plen);
			return *ret ? 0 : -ENOMEM;
		}
		line = eol ? eol + 1 : NULL;
	}
	return -ENOMEDIUM;
}

int cgroup1_devices_of_pid(pid_t pid, char **ret)
{
	auto_free char *text = NULL;
	char path[64];
	int r;

	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	r = read_file_at(AT_FDCWD, path, (size_t)64 * 1024, &text, NULL);
	if (r == -ENOENT)
		return -ESRCH;
	if (r < 0)
		return r;
	return cgroup1_devices_parse(text, ret);
}
