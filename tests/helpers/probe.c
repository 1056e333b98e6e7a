// SPDX-License-Identifier: Apache-2.0
/*
 * probe: tries open(2) on each path and prints "PATH RESULT" per line, where
 * RESULT is "ok" or the errno name (ENXIO means the cgroup allowed the
 * device and the driver is absent; EPERM means a device program denied it).
 * Built static so it runs in a bare busybox container.
 *
 *   probe [-n COUNT] [-w] PATH...
 *   probe -C MAJOR:COUNT DIR   make DIR/1..COUNT, char nodes MAJOR:1..COUNT
 *   probe -X A B               swap A and B with renameat2(RENAME_EXCHANGE)
 *                              forever (a container racing devgate's node work)
 *   probe -L MS PATH [STOP]    open PATH again and again for MS milliseconds,
 *                              or until the path STOP exists (then one open
 *                              more, begun after STOP was seen, ends it);
 *                              one line per run of equal results: "FIRST LAST
 *                              RESULT", CLOCK_MONOTONIC ns (one clock for every
 *                              container on the host) after the run's first
 *                              open returned and before its last began: the
 *                              result held from FIRST to LAST, whatever the
 *                              scheduler did around each open
 *
 * -C runs on the host (containers lack CAP_MKNOD): one process for thousands
 * of nodes, where a mknod(1) loop would take seconds.
 */
#include <errno.h>
#include <linux/fs.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

static const char *errname(int e)
{
	const char *n = strerrorname_np(e);

	return n ? n : "EUNKNOWN";
}

static int make_nodes(const char *spec, const char *dir)
{
	unsigned int major, count;
	char name[16];
	int dfd;

	if (sscanf(spec, "%u:%u", &major, &count) != 2 || (dfd = open(dir, O_DIRECTORY)) < 0)
		return 2;
	for (unsigned int i = 1; i <= count; i++) {
		snprintf(name, sizeof(name), "%u", i);
		if (mknodat(dfd, name, S_IFCHR | 0666, makedev(major, i)) < 0) {
			perror(name);
			close(dfd);
			return 1;
		}
	}
	close(dfd);
	return 0;
}

static int exchange_forever(const char *a, const char *b)
{
	for (;;)
		(void)syscall(SYS_renameat2, AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE);
	return 0;
}

static long long mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int open_result(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return errno;
	close(fd);
	return 0;
}

/* True once the time is up or STOP exists (stop may be NULL). */
static int loop_done(long long now, long long end, const char *stop)
{
	return now >= end || (stop && access(stop, F_OK) == 0);
}

static int loop_spans(const char *ms, const char *path, const char *stop)
{
	long long end = mono_ns() + atoll(ms) * 1000000LL, last = mono_ns();
	int cur = open_result(path);
	long long first = mono_ns();

	for (;;) {
		long long before = mono_ns();
		int done = loop_done(before, end, stop);
		int r = open_result(path);
		long long after = mono_ns();

		if (r != cur) {
			printf("%lld %lld %s\n", first, last, cur ? errname(cur) : "ok");
			cur = r;
			first = after;
		}
		last = before;
		if (done) {
			printf("%lld %lld %s\n", first, last, cur ? errname(cur) : "ok");
			return 0;
		}
	}
}

int main(int argc, char **argv)
{
	int count = 1, flags = O_RDONLY, opt, bad = 0;

	while ((opt = getopt(argc, argv, "n:wC:X:L:")) != -1) {
		if (opt == 'L')
			return optind < argc ? loop_spans(optarg, argv[optind], argv[optind + 1])
					     : 2;
		if (opt == 'C')
			return optind < argc ? make_nodes(optarg, argv[optind]) : 2;
		if (opt == 'X')
			return optind < argc ? exchange_forever(optarg, argv[optind]) : 2;
		if (opt == 'n')
			count = atoi(optarg);
		else if (opt == 'w')
			flags = O_RDWR;
		else
			return 2;
	}
	for (int i = optind; i < argc; i++) {
		for (int k = 0; k < count; k++) {
			int fd = open(argv[i], flags | O_CLOEXEC);

			if (fd >= 0) {
				close(fd);
				printf("%s ok\n", argv[i]);
			} else {
				printf("%s %s\n", argv[i], errname(errno));
				bad = 1;
			}
		}
	}
	return bad;
}
