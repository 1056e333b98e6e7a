// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fdpass.h"
#include "forkloop.h"

pid_t forkloop_paired(int *sock)
{
	int sv[2];
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	pid = fork();
	if (pid < 0) {
		int r = -errno;

		close(sv[0]);
		close(sv[1]);
		return r;
	}
	close(sv[pid == 0 ? 0 : 1]);
	*sock = sv[pid == 0 ? 1 : 0];
	return pid;
}

int forkloop_child(zygote_child_fn fn, struct child *ret)
{
	int sock = -1;
	pid_t pid = forkloop_paired(&sock);
	long pidfd;

	if (pid < 0)
		return pid;
	if (pid == 0) {
		fn(sock);
		_exit(1);
	}
	pidfd = syscall(SYS_pidfd_open, pid, 0);
	*ret = (struct child){ .pid = pid, .sock = sock, .pidfd = pidfd < 0 ? -1 : (int)pidfd };
	return 0;
}

/* Sends the child's pid, socket and pidfd to devgated. */
static int send_child(const struct child *c)
{
	const int fds[2] = { c->sock, c->pidfd };

	return fds_send(FORKLOOP_FD, &c->pid, sizeof(c->pid), fds, c->pidfd >= 0 ? 2 : 1);
}

void forkloop_serve(zygote_child_fn fn)
{
	char req;

	while (recv(FORKLOOP_FD, &req, 1, 0) == 1) {
		struct child c = { .sock = -1, .pidfd = -1 };

		if (forkloop_child(fn, &c) < 0)
			continue; /* devgated sees no reply and forks itself */
		(void)send_child(&c);
		close(c.sock);
		if (c.pidfd >= 0)
			close(c.pidfd);
	}
	_exit(0);
}
