// SPDX-License-Identifier: Apache-2.0
/*
 * openloop: opens a granted and a denied node from inside a cgroup, over
 * and over, until told to stop: nothing devgated does meanwhile (a restart,
 * a change of the gate's form) may deny the one or let the other through.
 *
 *   openloop [-t TIMEOUT_MS] CGROUP GRANTED DENIED READY STOP
 *
 * It moves itself into CGROUP, creates the file READY once its first round
 * saw GRANTED reach the driver (ENXIO here) and DENIED give EPERM, and stops
 * when the file STOP exists. Prints "opens N granted_denied G denied_open D"
 * and exits 1 when G or D is not 0, or on a timeout (2).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cgjoin.h"

int main(int argc, char **argv)
{
	unsigned long timeout_ms = 60000, opens = 0, granted_denied = 0, denied_open = 0;
	unsigned long long start = now_us();
	int o, ready = 0;

	while ((o = getopt(argc, argv, "t:")) != -1) {
		if (o != 't') {
			fprintf(stderr,
				"usage: openloop [-t MS] CGROUP GRANTED DENIED READY STOP\n");
			return 2;
		}
		timeout_ms = strtoul(optarg, NULL, 10);
	}
	if (argc - optind != 5) {
		fprintf(stderr, "usage: openloop [-t MS] CGROUP GRANTED DENIED READY STOP\n");
		return 2;
	}
	if (join_cgroup(argv[optind]) < 0) {
		fprintf(stderr, "openloop: cannot join %s\n", argv[optind]);
		return 2;
	}
	while (access(argv[optind + 4], F_OK) < 0) {
		int g = open_errno(argv[optind + 1]), d = open_errno(argv[optind + 2]);

		opens++;
		granted_denied += g == EPERM;
		denied_open += d != EPERM;
		if (!ready && g == ENXIO && d == EPERM) {
			int fd = open(argv[optind + 3], O_WRONLY | O_CREAT | O_CLOEXEC, 0644);

			ready = fd >= 0;
			if (fd >= 0)
				close(fd);
		}
		if (now_us() - start > timeout_ms * 1000ull) {
			fprintf(stderr, "openloop: no stop within %lu ms\n", timeout_ms);
			return 2;
		}
	}
	printf("opens %lu granted_denied %lu denied_open %lu\n", opens, granted_denied,
	       denied_open);
	return granted_denied || denied_open ? 1 : 0;
}
