// SPDX-License-Identifier: Apache-2.0
/*
 * threadopen: threads of one process, all on one CPU with a CPU hog among
 * them, open a granted and a denied node from inside a cgroup for a while.
 * The programs of one access then run with other threads of the process
 * waiting on that CPU: a lookout record shared between threads would let
 * one thread's access read another's (a granted node denied).
 *
 *   threadopen [-n THREADS] [-c CPU] [-d MS] CGROUP GRANTED DENIED
 *
 * Prints "opens N granted_denied G denied_open D" and exits 1 when G or D
 * is not 0 (or no granted open reached the driver), 2 on a usage error.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cgjoin.h"

static const char *granted, *denied;
static atomic_int stop;
static atomic_ulong opens, granted_denied, denied_open, reached;

static void *opener(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		int g = open_errno(granted), d = open_errno(denied);

		atomic_fetch_add(&opens, 1);
		atomic_fetch_add(&granted_denied, g == EPERM);
		atomic_fetch_add(&reached, g == ENXIO);
		atomic_fetch_add(&denied_open, d != EPERM);
	}
	return NULL;
}

/* Keeps the CPU busy, so that the openers are preempted where the kernel allows. */
static void *hog(void *arg)
{
	volatile unsigned long spin = 0;

	(void)arg;
	while (!atomic_load(&stop))
		spin++;
	return NULL;
}

int main(int argc, char **argv)
{
	unsigned long threads = 8, cpu = 0, ms = 3000;
	pthread_t tid[65];
	pthread_attr_t attr;
	cpu_set_t set;
	int o;

	while ((o = getopt(argc, argv, "n:c:d:")) != -1) {
		unsigned long v = strtoul(optarg, NULL, 10);

		if (o == 'n' && v >= 1 && v <= 64)
			threads = v;
		else if (o == 'c')
			cpu = v;
		else if (o == 'd')
			ms = v;
		else
			goto usage;
	}
	if (argc - optind != 3)
		goto usage;
	granted = argv[optind + 1];
	denied = argv[optind + 2];
	if (join_cgroup(argv[optind]) < 0) {
		fprintf(stderr, "threadopen: cannot join %s\n", argv[optind]);
		return 2;
	}
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	pthread_attr_init(&attr);
	if (sched_setaffinity(0, sizeof(set), &set) < 0 ||
	    pthread_attr_setaffinity_np(&attr, sizeof(set), &set) != 0) {
		perror("threadopen: affinity");
		return 2;
	}
	for (unsigned long i = 0; i <= threads; i++) {
		if (pthread_create(&tid[i], &attr, i == threads ? hog : opener, NULL) != 0) {
			fprintf(stderr, "threadopen: cannot start thread %lu\n", i);
			return 2;
		}
	}
	pthread_attr_destroy(&attr);
	usleep((useconds_t)(ms * 1000));
	atomic_store(&stop, 1);
	for (unsigned long i = 0; i <= threads; i++)
		pthread_join(tid[i], NULL);
	printf("opens %lu granted_denied %lu denied_open %lu\n", atomic_load(&opens),
	       atomic_load(&granted_denied), atomic_load(&denied_open));
	return atomic_load(&granted_denied) || atomic_load(&denied_open) || !atomic_load(&reached);
usage:
	fprintf(stderr, "usage: threadopen [-n THREADS] [-c CPU] [-d MS] CGROUP GRANTED DENIED\n");
	return 2;
}
