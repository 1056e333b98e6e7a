// SPDX-License-Identifier: Apache-2.0
/*
 * Which process keeps a BPF program open, read from /proc/PID/fd and
 * fdinfo. LXC's monitor keeps a descriptor of its current device program
 * for the container's life; supersede.c reads a move from one program to
 * another as the runtime's own word that it replaced the first.
 *
 * It reads /proc only, and only the parents of a cgroup's processes (a
 * runtime's monitor is the parent of the container's init): a scan of
 * every process costs milliseconds. It changes nothing.
 */
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
#include "sys/target.h"
#include "util.h"

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

/* 1 when piddir holds program prog_id open, 0 when not, -ESRCH if unreadable. */
static int holds_in(int piddir, uint32_t prog_id)
{
	int fd = openat(piddir, "fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	auto_closedir DIR *d = fd < 0 ? NULL : fdopendir(fd);
	struct dirent *de;

	if (!d) {
		safe_close(fd);
		return -ESRCH;
	}
	while ((de = readdir(d))) {
		if (de->d_name[0] != '.' && fd_prog_id(piddir, de->d_name) == prog_id)
			return 1;
	}
	return 0;
}

/* The parent of pid, from /proc/PID/stat. */
static int parent_of(pid_t pid, pid_t *ret)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	return proc_stat(AT_FDCWD, path, ret, NULL);
}

/* The distinct parents of the first PROGFD_PROCS processes of cgfd. */
static size_t parents(int cgfd, pid_t *out, size_t max)
{
	int fd = openat(cgfd, "cgroup.procs", O_RDONLY | O_CLOEXEC);
	auto_fclose FILE *f = fd < 0 ? NULL : fdopen(fd, "re");
	size_t n = 0;
	int pid;

	if (!f) {
		safe_close(fd);
		return 0;
	}
	for (size_t seen = 0; seen < PROGFD_PROCS && n < max && fscanf(f, "%d", &pid) == 1;
	     seen++) {
		pid_t ppid;
		bool dup = false;

		if (parent_of(pid, &ppid) < 0 || ppid <= 0)
			continue;
		for (size_t i = 0; i < n; i++)
			dup |= out[i] == ppid;
		if (!dup)
			out[n++] = ppid;
	}
	return n;
}

int progfd_owner(int cgfd, uint32_t prog_id, struct progfd_proc *ret)
{
	pid_t cand[PROGFD_PROCS];
	size_t n = parents(cgfd, cand, ARRAY_SIZE(cand));

	for (size_t i = 0; i < n; i++) {
		struct progfd_proc p = { .pid = cand[i] };
		char path[32];
		auto_close int piddir = -1;

		if (p.pid == getpid())
			continue;
		snprintf(path, sizeof(path), "/proc/%d", (int)p.pid);
		piddir = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (piddir < 0 || proc_stat(piddir, "stat", NULL, &p.start) < 0 ||
		    holds_in(piddir, prog_id) != 1)
			continue;
		*ret = p;
		return 1;
	}
	return 0;
}

int progfd_holds(const struct progfd_proc *p, uint32_t prog_id)
{
	char path[32];
	uint64_t start;
	auto_close int piddir = -1;

	snprintf(path, sizeof(path), "/proc/%d", (int)p->pid);
	piddir = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (piddir < 0 || proc_stat(piddir, "stat", NULL, &start) < 0 || start != p->start)
		return -ESRCH;
	return holds_in(piddir, prog_id);
}
