// SPDX-License-Identifier: Apache-2.0
/*
 * displace: does to a leased cgroup what systemd's daemon-reload or a
 * runtime's update does (attach its own device program, then detach the
 * ones it did not make, devgate's gate among them) and measures how long
 * the container goes without its grant.
 *
 *   displace [-n ROUNDS] [-t TIMEOUT_MS] [-r] CGROUP PROG_PIN GRANTED DENIED
 *
 * It moves itself into CGROUP. Each round it attaches the program pinned at
 * PROG_PIN (ALLOW_MULTI), detaches every devgate_gate attached before, and
 * opens the node GRANTED until it reaches the driver again (ENXIO, no
 * driver here): that is the heal time. On every try the node DENIED must
 * fail with EPERM; anything else is a violation (the device was let
 * through). Prints "round N heal_us T" per round, then
 * "heal_us p50 P p99 Q max M"; exit 1 on a violation or a timeout.
 * With -r it first detaches the program of the round before: the beside
 * gate (gate-mode = beside) leaves it attached, before itself.
 * With -p PID each round line adds where the heal time went, from
 * /proc/PID/schedstat and this process's own: PID's time on a CPU and
 * waiting for one, and this prober's wait ("dg_run_us A dg_wait_us B
 * self_wait_us C").
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>

#include "cgjoin.h"

#define MAX_PROGS 64

/* The fds of the devgate gates attached to cgfd now; how many. */
static int gates_of(int cgfd, int *fds)
{
	__u32 ids[MAX_PROGS], cnt = MAX_PROGS, flags = 0;
	int n = 0;

	if (bpf_prog_query(cgfd, BPF_CGROUP_DEVICE, 0, &flags, ids, &cnt) < 0)
		return -errno;
	for (__u32 i = 0; i < cnt; i++) {
		struct bpf_prog_info info = { 0 };
		__u32 len = sizeof(info);
		int fd = bpf_prog_get_fd_by_id(ids[i]);

		if (fd < 0)
			continue;
		if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0 &&
		    strcmp(info.name, "devgate_gate") == 0)
			fds[n++] = fd;
		else
			close(fd);
	}
	return n;
}

static int reattach;	      /* -r */
static const char *watch_pid; /* -p */

struct sched_at {
	unsigned long long run, wait, self_wait;
};

/* run and wait ns of /proc/PID/schedstat; zeros when unreadable. */
static void schedstat_of(const char *pid, unsigned long long *run, unsigned long long *wait)
{
	char path[64];
	FILE *f;

	*run = *wait = 0;
	snprintf(path, sizeof(path), "/proc/%s/schedstat", pid);
	f = fopen(path, "re");
	if (!f)
		return;
	if (fscanf(f, "%llu %llu", run, wait) != 2)
		*run = *wait = 0;
	fclose(f);
}

static void sched_now(struct sched_at *s)
{
	unsigned long long self_run;

	schedstat_of(watch_pid, &s->run, &s->wait);
	schedstat_of("self", &self_run, &s->self_wait);
}

static int cmp_ull(const void *a, const void *b)
{
	unsigned long long x = *(const unsigned long long *)a, y = *(const unsigned long long *)b;

	return x < y ? -1 : x > y;
}

/* One displacement; the heal time in us, or -1 on a timeout or violation. */
static long long round_once(int cgfd, int progfd, const char *granted, const char *denied,
			    unsigned long long timeout_us, unsigned long *violations,
			    struct sched_at *spent)
{
	struct sched_at a = { 0 }, b = { 0 };
	int gates[MAX_PROGS], n, e;
	unsigned long long t0, t;

	if (reattach && bpf_prog_detach2(progfd, cgfd, BPF_CGROUP_DEVICE) < 0 && errno != ENOENT)
		fprintf(stderr, "displace: detach own: %s\n", strerror(errno));
	n = gates_of(cgfd, gates);

	if (n < 0) {
		fprintf(stderr, "displace: query: %s\n", strerror(-n));
		return -1;
	}
	if (watch_pid)
		sched_now(&a);
	t0 = now_us();
	if (bpf_prog_attach(progfd, cgfd, BPF_CGROUP_DEVICE, BPF_F_ALLOW_MULTI) < 0) {
		fprintf(stderr, "displace: attach: %s\n", strerror(errno));
		return -1;
	}
	for (int i = 0; i < n; i++) {
		if (bpf_prog_detach2(gates[i], cgfd, BPF_CGROUP_DEVICE) < 0 && errno != ENOENT)
			fprintf(stderr, "displace: detach: %s\n", strerror(errno));
		close(gates[i]);
	}
	for (;;) {
		e = open_errno(denied);
		if (e != EPERM) {
			fprintf(stderr, "displace: %s gave %s, not EPERM\n", denied, strerror(e));
			(*violations)++;
		}
		t = now_us();
		if (open_errno(granted) == ENXIO) {
			if (watch_pid) {
				sched_now(&b);
				spent->run = b.run - a.run;
				spent->wait = b.wait - a.wait;
				spent->self_wait = b.self_wait - a.self_wait;
			}
			return (long long)(t - t0);
		}
		if (t - t0 > timeout_us) {
			fprintf(stderr, "displace: not healed after %llu ms\n", timeout_us / 1000);
			return -1;
		}
		usleep(50);
	}
}

int main(int argc, char **argv)
{
	unsigned long rounds = 1, timeout_ms = 5000, violations = 0;
	unsigned long long *heal;
	int o, cgfd, progfd, failed = 0;

	while ((o = getopt(argc, argv, "n:t:rp:")) != -1) {
		if (o == 'n')
			rounds = strtoul(optarg, NULL, 10);
		else if (o == 't')
			timeout_ms = strtoul(optarg, NULL, 10);
		else if (o == 'r')
			reattach = 1;
		else if (o == 'p')
			watch_pid = optarg;
		else
			return 2;
	}
	if (argc - optind != 4 || rounds == 0 || rounds > 100000) {
		fprintf(stderr,
			"usage: displace [-n ROUNDS] [-t TIMEOUT_MS] [-r] [-p PID] CGROUP PROG_PIN "
			"GRANTED DENIED\n");
		return 2;
	}
	heal = calloc(rounds, sizeof(*heal));
	srand((unsigned int)getpid());
	cgfd = open(argv[optind], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	progfd = bpf_obj_get(argv[optind + 1]);
	if (!heal || cgfd < 0 || progfd < 0 || join_cgroup(argv[optind]) < 0) {
		perror("displace: setup");
		return 2;
	}
	for (unsigned long i = 0; i < rounds; i++) {
		struct sched_at spent = { 0 };
		long long us = round_once(cgfd, progfd, argv[optind + 2], argv[optind + 3],
					  timeout_ms * 1000ull, &violations, &spent);

		if (us < 0) {
			failed = 1;
			break;
		}
		heal[i] = (unsigned long long)us;
		printf("round %lu heal_us %llu", i + 1, heal[i]);
		printf(" t0 %llu", now_us() - heal[i]);
		if (watch_pid)
			printf(" dg_run_us %llu dg_wait_us %llu self_wait_us %llu",
			       spent.run / 1000, spent.wait / 1000, spent.self_wait / 1000);
		putchar('\n');
		/* 2-22 ms apart, so rounds do not fall into step with a periodic check. */
		usleep(2000 + (useconds_t)(rand() % 20000));
	}
	if (!failed) {
		qsort(heal, rounds, sizeof(*heal), cmp_ull);
		printf("heal_us p50 %llu p99 %llu max %llu\n", heal[(rounds - 1) / 2],
		       heal[(rounds * 99 + 99) / 100 - 1], heal[rounds - 1]);
	}
	if (violations)
		printf("violations %lu\n", violations);
	free(heal);
	return failed || violations ? 1 : 0;
}
