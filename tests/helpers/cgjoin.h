/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the test helpers that move themselves into a container's cgroup
 * share (displace.c, moveprobe.c, openloop.c, threadopen.c): a monotonic clock in
 * microseconds, the join, and an open's result.
 */
#ifndef DEVGATE_TEST_CGJOIN_H
#define DEVGATE_TEST_CGJOIN_H

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static inline unsigned long long now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000ull + (unsigned long long)ts.tv_nsec / 1000;
}

/* Moves the calling process into the cgroup v2 directory cg; 0 or -errno. */
static inline int join_cgroup(const char *cg)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/cgroup.procs", cg);
	f = fopen(path, "w");
	if (!f)
		return -errno;
	fprintf(f, "%d\n", getpid());
	return fclose(f) == 0 ? 0 : -errno;
}

/* Opens path read-only and closes it: 0, or the open's errno. */
static inline int open_errno(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		close(fd);
		return 0;
	}
	return errno;
}

#endif
