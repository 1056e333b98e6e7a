// SPDX-License-Identifier: Apache-2.0
/*
 * Finds the processes of a cgroup that still hold a device (an open
 * descriptor or a mapping, by device number), and signals them through
 * pidfds. Only /proc is read; no process is signalled unless the caller
 * asks and the process is still in the cgroup. The scan is exact, never a
 * guess from counters: a descriptor can come into the cgroup without an
 * open there (SCM_RIGHTS, a process moved in, a grant made again).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stddef.h>
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

static const struct dg_node *node_of(const struct stat *st, const struct dg_node *nodes, size_t n)
{
	if (!S_ISCHR(st->st_mode))
		return NULL;
	for (size_t i = 0; i < n; i++) {
		if (major(st->st_rdev) == nodes[i].major && minor(st->st_rdev) == nodes[i].minor)
			return &nodes[i];
	}
	return NULL;
}

/*
 * The longest entry getdents64 can return: a NAME_MAX name, its NUL and the
 * header, padded to 8 bytes.
 */
#define DIRENT_MAX ((offsetof(struct dirent64, d_name) + NAME_MAX + 1 + 7) & ~(size_t)7)

/*
 * Calls fn(dirfd, entry, arg) for each entry of directory dirfd but "." and
 * "..", until fn returns true (then returns true). Reads with getdents64
 * itself: a DIR stream costs three more syscalls (fstat, two fcntl) per
 * directory. Only for /proc/PID/fd and cgroupfs: both fill the buffer until
 * the next entry does not fit (proc_readfd_common, kernfs_fop_readdir), so
 * a read that left room for the longest entry was the last, and the read
 * that would return 0 is not made.
 */
static bool each_entry(int dirfd, bool (*fn)(int, const struct dirent64 *, void *), void *arg)
{
	char buf[8192] __attribute__((aligned(8)));
	ssize_t len;

	while ((len = getdents64(dirfd, buf, sizeof(buf))) > 0) {
		for (ssize_t off = 0; off < len;) {
			const struct dirent64 *de = (const void *)(buf + off);

			off += de->d_reclen;
			if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0 &&
			    fn(dirfd, de, arg))
				return true;
		}
		if ((size_t)len <= sizeof(buf) - DIRENT_MAX)
			break;
	}
	return false;
}

struct fd_walk {
	const struct dg_node *nodes, *found;
	size_t n;
};

static bool fd_on_node(int fddir, const struct dirent64 *de, void *arg)
{
	struct fd_walk *w = arg;
	struct stat st;

	/* stat follows the magic link to the open file itself. */
	if (fstatat(fddir, de->d_name, &st, 0) == 0)
		w->found = node_of(&st, w->nodes, w->n);
	return w->found != NULL;
}

/* Returns the first of nodes that an open descriptor of the process (fd directory fddir) is on. */
static const struct dg_node *holds_fd(int fddir, const struct dg_node *nodes, size_t n)
{
	struct fd_walk w = { .nodes = nodes, .n = n };

	each_entry(fddir, fd_on_node, &w);
	return w.found;
}

/*
 * The files a scan has already looked at, by the device and inode that
 * /proc/PID/maps prints: a library mapped five times, or by every process
 * of the container, is stat()ed once. The same inode is the same device
 * number, so this is exact.
 */
struct seen_file {
	uint64_t dev, ino;
	const struct dg_node *node; /* NULL: none of the nodes */
};

struct seen {
	size_t n;
	struct seen_file v[256];
};

static bool seen_find(const struct seen *s, uint64_t dev, uint64_t ino, const struct dg_node **node)
{
	for (size_t i = 0; i < s->n; i++) {
		if (s->v[i].dev == dev && s->v[i].ino == ino) {
			*node = s->v[i].node;
			return true;
		}
	}
	return false;
}

/*
 * Returns the first of nodes that a mapping of the process is on. Each
 * file is looked at once through map_files (by the first of its ranges),
 * not each range: that was most of a revoke's time.
 */
static const struct dg_node *holds_map(int fddir, const struct dg_node *nodes, size_t n,
				       struct seen *seen)
{
	auto_free char *text = NULL;
	const struct dg_node *node = NULL;
	char *save = NULL;

	if (read_file_at(fddir, "../maps", (size_t)16 * 1024 * 1024, &text, NULL) < 0)
		return NULL;
	for (char *l = strtok_r(text, "\n", &save); l && !node; l = strtok_r(NULL, "\n", &save)) {
		unsigned long start, end;
		unsigned int ma, mi;
		unsigned long long ino;
		char name[64];
		struct stat st;
		uint64_t dev;

		/* Anonymous memory has inode 0: no file, no device. */
		if (sscanf(l, "%lx-%lx %*s %*x %x:%x %llu", &start, &end, &ma, &mi, &ino) != 5 ||
		    ino == 0)
			continue;
		dev = (uint64_t)ma << 32 | mi;
		if (seen_find(seen, dev, ino, &node))
			continue;
		/* map_files names have no leading zeros, unlike maps. */
		snprintf(name, sizeof(name), "../map_files/%lx-%lx", start, end);
		if (fstatat(fddir, name, &st, 0) < 0)
			continue; /* unmapped since */
		node = node_of(&st, nodes, n);
		/*
		 * Only what is still the file maps named is remembered: a range
		 * remapped in between must not vouch for the file other
		 * processes map.
		 */
		if (major(st.st_dev) == ma && minor(st.st_dev) == mi && st.st_ino == ino &&
		    seen->n < ARRAY_SIZE(seen->v))
			seen->v[seen->n++] =
				(struct seen_file){ .dev = dev, .ino = ino, .node = node };
	}
	return node;
}

/*
 * Everything about the process is read through its fd directory, the one
 * thing opened: "../maps" from there is the same process's, since a dead
 * process's /proc entries stop resolving and a reused PID is another entry.
 */
static bool holder_of(pid_t pid, const struct dg_node *nodes, size_t n, struct seen *seen,
		      struct holder *h)
{
	char path[64];
	auto_close int fddir = -1;
	auto_free char *comm = NULL;
	const struct dg_node *node;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	fddir = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fddir < 0)
		return false;
	node = holds_fd(fddir, nodes, n);
	if (!node)
		node = holds_map(fddir, nodes, n, seen);
	if (!node)
		return false;
	*h = (struct holder){ .pid = pid, .node = *node };
	if (read_file_at(fddir, "../comm", sizeof(h->comm), &comm, NULL) == 0) {
		comm[strcspn(comm, "\n")] = '\0';
		snprintf(h->comm, sizeof(h->comm), "%s", comm);
	}
	return true;
}

struct scan {
	const struct dg_node *nodes;
	size_t n, max, found;
	struct holder *out;
	struct seen seen;
	unsigned int depth;
};

static void scan(int cgfd, struct scan *sc);

/* The longest line of cgroup.procs: a PID (pid_max is at most 2^22) and its newline, and more. */
#define PID_LINE_MAX 16

/*
 * Reads cgroup.procs of cgroup cgfd whole into *ret. A seq_file read stops
 * at the end of its page-sized buffer, at the end of the file, or before a
 * line that does not fit what is left of the page: one that left room for
 * another line was the last, and the read that would return 0 is not made.
 */
static int read_procs(int cgfd, char **ret)
{
	auto_close int fd = openat(cgfd, "cgroup.procs", O_RDONLY | O_CLOEXEC);
	auto_free char *text = NULL;
	size_t page = (size_t)sysconf(_SC_PAGESIZE), len = 0, cap = 0;

	if (fd < 0)
		return -errno;
	for (;;) {
		ssize_t n;

		/* Never less than a page asked: a short read must be the kernel's. */
		if (cap - len < page + 1) {
			char *more;

			if (cap >= (size_t)4 * 1024 * 1024)
				return -EFBIG;
			cap = cap ? cap * 2 : 4 * page;
			more = realloc(text, cap);
			if (!more)
				return -ENOMEM;
			text = more;
		}
		n = read(fd, text + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		len += (size_t)n;
		if (n == 0 || (size_t)n + PID_LINE_MAX <= page)
			break;
	}
	text[len] = '\0';
	*ret = TAKE_PTR(text);
	return 0;
}

/* child is opened here, so it is read from its start. */
static bool scan_child(int cgfd, const struct dirent64 *de, void *arg)
{
	struct scan *sc = arg;
	auto_close int child = -1;

	if (de->d_type != DT_DIR)
		return false;
	child = openat(cgfd, de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (child >= 0) {
		sc->depth++;
		scan(child, sc);
		sc->depth--;
	}
	return sc->found >= sc->max;
}

/*
 * Looks for holders among the processes of cgroup cgfd (read from its
 * offset, which must be the start) and of its descendants, adding each to
 * sc->out (at most sc->max).
 */
static void scan(int cgfd, struct scan *sc)
{
	auto_free char *text = NULL;
	char *save = NULL;

	if (read_procs(cgfd, &text) == 0) {
		for (char *l = strtok_r(text, "\n", &save); l && sc->found < sc->max;
		     l = strtok_r(NULL, "\n", &save)) {
			pid_t pid;

			if (parse_pid(l, &pid) == 0 &&
			    holder_of(pid, sc->nodes, sc->n, &sc->seen, &sc->out[sc->found]))
				sc->found++;
		}
	}
	if (sc->depth < 16 && sc->found < sc->max)
		each_entry(cgfd, scan_child, sc);
}

size_t holders_find(int cgfd, const struct dg_node *nodes, size_t n, struct holder *out, size_t max)
{
	struct scan sc = { .nodes = nodes, .n = n, .max = max, .out = out };
	auto_close int own = -1;

	if (cgfd < 0 || n == 0)
		return 0;
	/* Rewinding the caller's fd costs one call; a fresh description of it, two. */
	if (lseek(cgfd, 0, SEEK_SET) < 0) {
		own = openat(cgfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (own < 0)
			return 0;
		cgfd = own;
	}
	scan(cgfd, &sc);
	return sc.found;
}

size_t holders_signal(const struct cgroot *root, const struct holder *h, size_t n,
		      const char *cgroup_path, int sig)
{
	size_t sent = 0;

	for (size_t i = 0; i < n; i++) {
		auto_close int pidfd = pidfd_open_pid(h[i].pid);
		auto_free char *cg = NULL;

		/* Through the pidfd, and only while the process is still in the container. */
		if (pidfd < 0 || cgroup_of_pid_in(root, h[i].pid, &cg) < 0 ||
		    !cgroup_path_is_ancestor(cgroup_path, cg))
			continue;
		if (syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0) == 0)
			sent++;
	}
	return sent;
}
