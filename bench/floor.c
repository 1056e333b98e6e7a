// SPDX-License-Identifier: Apache-2.0
/*
 * floor: the least a grant and a revoke can cost on this machine, done as
 * bare syscalls in one process with no daemon, protocol, checks or state:
 * the container's /dev opened once (O_PATH, through /proc/PID/root), then
 * per grant one mknodat on it and one BPF hash map update; per revoke one
 * unlinkat and one map delete. Nothing forks: devgated's kept /dev does
 * not either, so a ratio to this floor is what devgate adds.
 *
 *   floor -n N [-f] [-d DIR] [-p MS] PID   prints "grant NS" and "revoke NS"
 *   floor -n N -r                          prints "roundtrip NS"
 *
 * -f is the floor before the kept /dev, named "fork floor" where it is
 * shown: pidfd_open, fork, setns(CLONE_NEWNS) in the child, then the same
 * calls. With -d, each step also replaces a small file in DIR the way a
 * record made to survive a crash would be (write, fsync, rename, fsync the
 * directory).
 *
 * -r is the row named "socket round trip": the least any daemon with a
 * client on a socket adds to each request. A child answers on a connected
 * unix stream socket; each step is one request of a grant's size sent and
 * one reply of a grant reply's size read back, as devgatectl and devgated
 * exchange them (no JSON, no work in between).
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>
#include <bpf/bpf.h>

#include "devgate.h"
#include "util.h"

static int in_child(int pidfd, int rootfd, bool make)
{
	pid_t child = fork();
	int status;

	if (child < 0)
		return -errno;
	if (child == 0) {
		int devfd;

		if (setns(pidfd, CLONE_NEWNS) < 0)
			_exit(1);
		devfd = openat(rootfd, "dev", O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (devfd < 0)
			_exit(2);
		if (make ? mknodat(devfd, "floor0", S_IFCHR | 0666, makedev(195, 0)) < 0
			 : unlinkat(devfd, "floor0", 0) < 0)
			_exit(3);
		_exit(0);
	}
	if (waitpid(child, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status))
		return -EIO;
	return 0;
}

static int durable(int dirfd)
{
	static const char lease[256] = "{ \"format\": 1 }";

	return dirfd < 0 ? 0
			 : write_file_atomic_at(dirfd, "floor.json", lease, sizeof(lease), 0600,
						true);
}

/* The node, made or removed on the container's /dev, opened once: no fork, no walk. */
static int on_dev(int devfd, bool make)
{
	int r = make ? mknodat(devfd, "floor0", S_IFCHR | 0666, makedev(195, 0))
		     : unlinkat(devfd, "floor0", 0);

	return r < 0 ? -errno : 0;
}

/* devfd >= 0: the fork-free floor; otherwise the fork floor, through pid. */
static int once(pid_t pid, int rootfd, int devfd, int map, int dirfd, bool grant, uint64_t *ns)
{
	struct dg_grant_key key = { .cgroup_id = 1, .type = DG_DEV_CHAR, .major = 195 };
	struct dg_grant_val val = { .access = DG_ACC_READ | DG_ACC_WRITE };
	uint64_t t0 = now_mono_ns();
	int pidfd = -1, r;

	if (devfd >= 0) {
		r = on_dev(devfd, grant);
	} else {
		pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
		r = pidfd < 0 ? -errno : in_child(pidfd, rootfd, grant);
	}
	if (r == 0)
		r = grant ? bpf_map_update_elem(map, &key, &val, BPF_ANY)
			  : bpf_map_delete_elem(map, &key);
	if (r == 0)
		r = durable(dirfd);
	if (pidfd >= 0)
		close(pidfd);
	*ns = now_mono_ns() - t0;
	return r;
}

/* Sizes of a grant's request line and reply line on the wire, as strace shows them. */
#define RT_ASK 200
#define RT_REPLY 1100

/* Reads exactly n bytes; false at EOF or on an error. */
static bool read_all(int fd, char *buf, size_t n)
{
	for (size_t got = 0; got < n;) {
		ssize_t r = read(fd, buf + got, n - got);

		if (r <= 0)
			return false;
		got += (size_t)r;
	}
	return true;
}

/* The socket round trip row: n request/reply exchanges with a forked peer. */
static int round_trips(int n)
{
	static char buf[RT_REPLY];
	int sv[2], status;
	pid_t child;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return perror("floor: socketpair"), 1;
	child = fork();
	if (child < 0)
		return perror("floor: fork"), 1;
	if (child == 0) {
		close(sv[0]);
		while (read_all(sv[1], buf, RT_ASK))
			if (write(sv[1], buf, RT_REPLY) != RT_REPLY)
				_exit(1);
		_exit(0);
	}
	close(sv[1]);
	for (int i = 0; i < n; i++) {
		uint64_t t0 = now_mono_ns();

		if (write(sv[0], buf, RT_ASK) != RT_ASK || !read_all(sv[0], buf, RT_REPLY))
			return fprintf(stderr, "floor: the peer went away\n"), 1;
		printf("roundtrip %llu\n", (unsigned long long)(now_mono_ns() - t0));
	}
	close(sv[0]);
	if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status))
		return fprintf(stderr, "floor: the peer failed\n"), 1;
	return 0;
}

int main(int argc, char **argv)
{
	int n = 200, map, rootfd, opt, dirfd = -1, devfd = -1, pause_ms = 0;
	bool fork_floor = false, rt = false;
	char path[64];
	pid_t pid;

	while ((opt = getopt(argc, argv, "n:d:p:fr")) != -1) {
		if (opt == 'f')
			fork_floor = true;
		else if (opt == 'r')
			rt = true;
		else if (opt == 'n')
			n = atoi(optarg);
		else if (opt == 'p') /* pause before each grant, as dgload -p */
			pause_ms = atoi(optarg);
		else if (opt == 'd')
			dirfd = open(optarg, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		else
			return 2;
	}
	if (rt)
		return round_trips(n);
	if (optind >= argc)
		return fprintf(stderr, "usage: floor -n N [-f] [-d DIR] [-p MS] PID | -n N -r\n"),
		       2;
	pid = (pid_t)atoi(argv[optind]);
	snprintf(path, sizeof(path), "/proc/%d/root", (int)pid);
	rootfd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	map = bpf_map_create(BPF_MAP_TYPE_HASH, "floor", sizeof(struct dg_grant_key),
			     sizeof(struct dg_grant_val), 1024, NULL);
	if (rootfd >= 0 && !fork_floor)
		devfd = openat(rootfd, "dev", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0 || map < 0 || (!fork_floor && devfd < 0))
		return perror("floor: setup"), 1;
	for (int i = 0; i < n; i++) {
		uint64_t g, v;

		if (pause_ms)
			usleep((useconds_t)pause_ms * 1000);
		if (once(pid, rootfd, devfd, map, dirfd, true, &g) < 0 ||
		    once(pid, rootfd, devfd, map, dirfd, false, &v) < 0)
			return fprintf(stderr, "floor: a step failed\n"), 1;
		printf("grant %llu\nrevoke %llu\n", (unsigned long long)g, (unsigned long long)v);
	}
	return 0;
}
