// SPDX-License-Identifier: Apache-2.0
/*
 * moveprobe: makes devgated move its beside gate to last place, again and
 * again, and opens a granted node all the while: a move must never deny it.
 *
 *   moveprobe [-n ROUNDS] [-t TIMEOUT_MS] CGROUP GRANTED
 *
 * It moves itself into CGROUP. Each round it attaches a program of its own
 * that allows every device (so only devgate's move could deny), then opens
 * GRANTED in a loop until one devgate_beside is attached after it and no
 * other, then detaches its program. Any open of GRANTED that gives EPERM
 * is a violation. Prints "round N move_us T" per round, then "violations
 * V" where there were any; exit 1 on a violation or a timeout.
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

/* A program that allows every device: r0 = 1; exit. */
static int load_allow(void)
{
	struct bpf_insn insns[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = 0, .imm = 1 },
		{ .code = BPF_JMP | BPF_EXIT },
	};

	return bpf_prog_load(BPF_PROG_TYPE_CGROUP_DEVICE, "allow_all", "GPL", insns, 2, NULL);
}

static unsigned int prog_id(int fd)
{
	struct bpf_prog_info info = { 0 };
	__u32 len = sizeof(info);

	return bpf_obj_get_info_by_fd(fd, &info, &len) == 0 ? info.id : 0;
}

/* 1 when exactly one devgate_beside is attached to cgfd, after program mine; 0 if not. */
static int moved(int cgfd, unsigned int mine)
{
	__u32 ids[MAX_PROGS], cnt = MAX_PROGS, flags = 0;
	int seen_mine = 0, after = 0, besides = 0;

	if (bpf_prog_query(cgfd, BPF_CGROUP_DEVICE, 0, &flags, ids, &cnt) < 0)
		return 0;
	for (__u32 i = 0; i < cnt; i++) {
		struct bpf_prog_info info = { 0 };
		__u32 len = sizeof(info);
		int fd = bpf_prog_get_fd_by_id(ids[i]);

		seen_mine |= ids[i] == mine;
		if (fd >= 0 && bpf_obj_get_info_by_fd(fd, &info, &len) == 0 &&
		    strcmp(info.name, "devgate_beside") == 0) {
			besides++;
			after += seen_mine;
		}
		if (fd >= 0)
			close(fd);
	}
	return besides == 1 && after == 1;
}

int main(int argc, char **argv)
{
	unsigned long rounds = 20, timeout_ms = 5000, violations = 0;
	int o, cgfd, progfd, failed = 0;
	unsigned int mine;

	while ((o = getopt(argc, argv, "n:t:")) != -1) {
		if (o == 'n')
			rounds = strtoul(optarg, NULL, 10);
		else if (o == 't')
			timeout_ms = strtoul(optarg, NULL, 10);
		else
			return 2;
	}
	if (argc - optind != 2) {
		fprintf(stderr, "usage: moveprobe [-n ROUNDS] [-t TIMEOUT_MS] CGROUP GRANTED\n");
		return 2;
	}
	cgfd = open(argv[optind], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	progfd = load_allow();
	mine = progfd < 0 ? 0 : prog_id(progfd);
	if (cgfd < 0 || !mine || join_cgroup(argv[optind]) < 0) {
		perror("moveprobe: setup");
		return 2;
	}
	for (unsigned long r = 0; r < rounds && !failed; r++) {
		unsigned long long t0 = now_us(), t = t0;

		if (bpf_prog_attach(progfd, cgfd, BPF_CGROUP_DEVICE, BPF_F_ALLOW_MULTI) < 0) {
			perror("moveprobe: attach");
			return 2;
		}
		for (;;) {
			int fd = open(argv[optind + 1], O_RDONLY | O_CLOEXEC);

			if (fd >= 0)
				close(fd);
			else if (errno == EPERM)
				violations++;
			if (moved(cgfd, mine))
				break;
			t = now_us();
			if (t - t0 > timeout_ms * 1000ull) {
				fprintf(stderr, "moveprobe: not moved after %lu ms\n", timeout_ms);
				failed = 1;
				break;
			}
		}
		printf("round %lu move_us %llu\n", r + 1, t - t0);
		if (bpf_prog_detach2(progfd, cgfd, BPF_CGROUP_DEVICE) < 0)
			perror("moveprobe: detach");
	}
	if (violations)
		printf("violations %lu\n", violations);
	return failed || violations ? 1 : 0;
}
