// SPDX-License-Identifier: Apache-2.0
/*
 * probe: tries open(2) on each path and prints "PATH RESULT" per line, where
 * RESULT is "ok" or the errno name (ENXIO means the cgroup allowed the
 * device and the driver is absent; EPERM means a device program denied it).
 * Built static so it runs in a bare busybox container.
 *
 *   probe [-n COUNT] [-w] PATH...
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *errname(int e)
{
	const char *n = strerrorname_np(e);

	return n ? n : "EUNKNOWN";
}

int main(int argc, char **argv)
{
	int count = 1, flags = O_RDONLY, opt, bad = 0;

	while ((opt = getopt(argc, argv, "n:w")) != -1) {
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
