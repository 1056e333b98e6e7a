// SPDX-License-Identifier: Apache-2.0
/*
 * opencost: nanoseconds per open(2)+close(2) of PATH, the path every device
 * program sits on. Runs ROUNDS batches of N calls and prints each batch's
 * mean, so the caller can take a median. Static: runs in a bare container.
 *
 *   opencost [-n N] [-r ROUNDS] PATH
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	int n = 100000, rounds = 9, opt;

	while ((opt = getopt(argc, argv, "n:r:")) != -1) {
		if (opt == 'n')
			n = atoi(optarg);
		else if (opt == 'r')
			rounds = atoi(optarg);
		else
			return 2;
	}
	if (optind >= argc)
		return fprintf(stderr, "usage: opencost [-n N] [-r ROUNDS] PATH\n"), 2;
	for (int r = 0; r < rounds; r++) {
		double t0 = now_ns();

		for (int i = 0; i < n; i++) {
			int fd = open(argv[optind], O_RDONLY | O_CLOEXEC);

			if (fd < 0)
				return perror("opencost: open"), 1;
			close(fd);
		}
		printf("%.1f\n", (now_ns() - t0) / n);
	}
	return 0;
}
