// SPDX-License-Identifier: Apache-2.0
/*
 * Finds the processes of a cgroup that still hold a device (an open
 * descriptor or a mapping, by device number), and signals them through
 * pidfds. Only /proc is read; no process is signalled unless the caller
 * asks and the process is still in the cgroup.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "cgroup.h"
#include "cleanup.h"
#include "holders.h"
#include "target.h"
#include "util.h"

/*
 * Returns the first of nodes that an entry of dir (a process's /proc/PID/fd
 * or map_files, under procfd) points at, or NULL when none does.
 */
static const struct dg_node *holds_in(int procfd, const char *dir, const struct dg_node *nodes,
				      size_t n)
{
	int fd = openat(procfd, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	auto_closedir DIR *d = fd < 0 ? NULL : fdopendir(fd);
	struct dirent *de;

	if (!d) {
		safe_close(fd);
		return NULL;
	}
	while ((de = readdir(d))) {
		struct stat st;

		/* stat follows the magic link to the open file itself. */
		if (de->d_name[0] == '.' || fstatat(dirfd(d), de->d_name, &st, 0) < 0 ||
		    !S_ISCHR(st.st_mode))
			continue;
		for (size_t i = 0; i < n; i++) {
			if (major(st.st_rdev) == nodes[i].major &&
			    minor(st.st_rdev) == nodes[i].minor)
				return &nodes[i];
		}
	}
	return NULL;
}

static bool holder_of(pid_t pid, const struct dg_node *nodes, size_t n, struct holder *h)
{
	char path[64];
	auto_close int procfd = -1;
	auto_free char *comm = NULL;
	const struct dg_node *node;

	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	procfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (procfd < 0)
		return false;
	node = holds_in(procfd, "fd", nodes, n);
	if (!node)
		node = holds_in(procfd, "map_files", nodes, n);
	if (!node)
		return false;
	*h = (struct holder){ .pid = pid, .node = *node };
	if (read_file_at(procfd, "comm", sizeof(h->comm), &comm, NULL) == 0) {
		comm[strcspn(comm, "\n")] = '\0';
		snprintf(h->comm, sizeof(h->comm), "%s", comm);
	}
	return true;
}

/*
 * Looks for holders among the processes of cgroup cgfd and of its
 * descendants, adding each to out (at most max); returns the new count.
 */
static size_t scan(int cgfd, const struct dg_node *nodes, size_t n, struct holder *out, size_t max,
		   size_t found, unsigned int depth)
{
	auto_free char *text = NULL;
	auto_closedir DIR *d = NULL;
	char *save = NULL;
	struct dirent *de;
	int fd;

	if (read_file_at(cgfd, "cgroup.procs", (size_t)4 * 1024 * 1024, &text, NULL) == 0) {
		for (char *l = strtok_r(text, "\n", &save); l && found < max;
		     l = strtok_r(NULL, "\n", &save)) {
			pid_t pid;

			if (parse_pid(l, &pid) == 0 && holder_of(pid, nodes, n, &out[found]))
				found++;
		}
	}
	fd = depth < 16 ? openat(cgfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
	d = fd < 0 ? NULL : fdopendir(fd);
	while (d && found < max && (de = readdir(d))) {
		auto_close int child = -1;

		if (de->d_type != DT_DIR || de->d_name[0] == '.')
			continue;
		child = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (child >= 0)
			found = scan(child, nodes, n, out, max, found, depth + 1);
	}
	return found;
}

size_t holders_find(int cgfd, const struct dg_node *nodes, size_t n, struct holder *out, size_t max)
{
	if (cgfd < 0 || n == 0)
		return 0;
	return scan(cgfd, nodes, n, out, max, 0, 0);
}

size_t holders_signal(const struct holder *h, size_t n, const char *cgroup_path, int sig)
{
	size_t sent = 0;

	for (size_t i = 0; i < n; i++) {
		auto_close int pidfd = pidfd_open_pid(h[i].pid);
		auto_free char *cg = NULL;

		/* Through the pidfd, and only while the process is still in the container. */
		if (pidfd < 0 || cgroup_of_pid(h[i].pid, &cg) < 0 ||
		    !cgroup_path_is_ancestor(cgroup_path, cg))
			continue;
		if (syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0) == 0)
			sent++;
	}
	return sent;
}
