// SPDX-License-Identifier: Apache-2.0
/*
 * samepid PID CGROUP NSPID CMD...: starts CMD as process PID (a PID that a
 * process just left free: clone3's set_tid), in cgroup v2 directory
 * CGROUP and in the mount namespace of process NSPID. For target.bats: a
 * container's init replaced by another process under its very PID.
 * Prints nothing; exits 0 once CMD was started, 1 when PID was taken.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cgjoin.h"

int main(int argc, char **argv)
{
	pid_t want;
	struct clone_args ca = { .exit_signal = SIGCHLD, .set_tid_size = 1 };
	char ns[64];
	long pid;
	int fd;

	if (argc < 5 || (want = (pid_t)atoi(argv[1])) <= 1) {
		fprintf(stderr, "usage: samepid PID CGROUP NSPID CMD...\n");
		return 2;
	}
	ca.set_tid = (uint64_t)(uintptr_t)&want;
	snprintf(ns, sizeof(ns), "/proc/%s/ns/mnt", argv[3]);
	fd = open(ns, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		perror(ns);
		return 2;
	}
	pid = syscall(SYS_clone3, &ca, sizeof(ca));
	if (pid < 0) {
		fprintf(stderr, "samepid: clone3 with PID %d: %s\n", (int)want, strerror(errno));
		return 1;
	}
	if (pid > 0)
		return 0;
	if (join_cgroup(argv[2]) < 0 || setns(fd, CLONE_NEWNS) < 0) {
		perror("samepid: join");
		_exit(3);
	}
	execvp(argv[4], argv + 4);
	perror(argv[4]);
	_exit(127);
}
