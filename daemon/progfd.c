// SPDX-License-Identifier: Apache-2.0
#include <dirent.h>
#include <stdbool.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cleanup.h"
#include "progfd.h"
#include "util.h"

static int start_time(int piddir, uint64_t *ret)
{
	char buf[1024];
	auto_close int fd = openat(piddir, "stat", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
	const char *p;

	if (n <= 0)
		return -ESRCH;
	buf[n] = '\0';
	/* comm may hold spaces and ')': fields count from the last ')'. */
	p = strrchr(buf, ')');
	for (int field = 2; p && field < 22; field++)
		p = strchr(p + 1, ' ');
	if (!p || sscanf(p + 1, "%llu", (unsigned long long *)ret) != 1)
		return -EINVAL;
	return 0;
}

/* The id of the BPF program behind descriptor name of piddir; 0: not one. */
static uint32_t fd_prog_id(int piddir, const char *name)
{
	char path[300], link[32], line[128];
	ssize_t n;
	auto_fclose FILE *f = NULL;
	int fd;
	unsigned int id;

	snprintf(path, sizeof(path), "fd/%s", name);
	n = readlinkat(piddir, path, link, sizeof(link) - 1);
	if (n <= 0)
		return 0;
	link[n] = '\0';
	if (strcmp(link, "anon_inode:bpf-prog") != 0)
		return 0;
	snprintf(path, sizeof(path), "fdinfo/%s", name);
	fd = openat(piddir, path, O_RDONLY | O_CLOEXEC);
	f = fd < 0 ? NULL : fdopen(fd, "re");
	if (!f) {
		safe_close(fd);
		return 0;
	}
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "prog_id: %u", &id) == 1)
			return id;
	}
	return 0;
}

/* Sets held[i] where piddir holds program ids[i] open; -ESRCH if unreadable. */
static int scan_fds(int piddir, const uint32_t *ids, size_t n, bool *held)
{
	int fd = openat(piddir, "fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	auto_closedir DIR *d = fd < 0 ? NULL : fdopendir(fd);
	struct dirent *de;

	if (!d) {
		safe_close(fd);
		return -ESRCH;
	}
	while ((de = readdir(d))) {
		uint32_t id = de->d_name[0] == '.' ? 0 : fd_prog_id(piddir, de->d_name);

		for (size_t i = 0; id && i < n; i++)
			held[i] |= ids[i] == id;
	}
	return 0;
}

int progfd_find(const uint32_t *ids, size_t n, struct progfd_proc *ret)
{
	auto_closedir DIR *d = opendir("/proc");
	struct dirent *de;
	pid_t self = getpid();

	if (!d)
		return -errno;
	for (size_t i = 0; i < n; i++)
		ret[i] = (struct progfd_proc){ 0 };
	while ((de = readdir(d))) {
		auto_close int piddir = -1;
		bool held[PROGFD_MAX] = { false };
		uint64_t start = 0;
		uint32_t pid;

		if (parse_u32(de->d_name, &pid) < 0 || pid == 0 || (pid_t)pid == self)
			continue;
		piddir = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (piddir < 0 ||
		    scan_fds(piddir, ids, n < PROGFD_MAX ? n : PROGFD_MAX, held) < 0 ||
		    start_time(piddir, &start) < 0)
			continue;
		for (size_t i = 0; i < n && i < PROGFD_MAX; i++) {
			if (held[i] && !ret[i].pid)
				ret[i] = (struct progfd_proc){ .pid = (pid_t)pid, .start = start };
		}
	}
	return 0;
}

int progfd_holds(const struct progfd_proc *p, uint32_t prog_id)
{
	char path[32];
	uint64_t start;
	auto_close int piddir = -1;
	int r;

	snprintf(path, sizeof(path), "/proc/%d", (int)p->pid);
	piddir = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	bool held = false;

	if (piddir < 0 || start_time(piddir, &start) < 0 || start != p->start)
		return -ESRCH;
	r = scan_fds(piddir, &prog_id, 1, &held);
	return r < 0 ? r : held;
}
