// SPDX-License-Identifier: Apache-2.0
/*
 * Forking node helpers: a child with a socket to its parent, and the
 * zygote's loop that forks one per request and hands it to devgated. Built
 * into devgated and into the static devgated-node, so libc only.
 */
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

/* Closes this side's descriptors of a child handed to devgated. */
static void forget(struct child *c)
{
	if (c->sock >= 0)
		close(c->sock);
	if (c->pidfd >= 0)
		close(c->pidfd);
	*c = (struct child){ .sock = -1, .pidfd = -1 };
}

/*
 * One child is forked ahead and handed out on the next request, so that
 * it has had a whole request to run its set-up (seccomp) when its job
 * comes, even on a busy machine. It is as fresh as one forked on demand:
 * it has seen nothing but the zygote.
 */
void forkloop_serve(zygote_child_fn fn)
{
	struct child next = { .sock = -1, .pidfd = -1 };
	char req;

	if (forkloop_child(fn, &next) < 0)
		next.pid = 0;
	while (recv(FORKLOOP_FD, &req, 1, 0) == 1) {
		if (next.pid <= 0 && forkloop_child(fn, &next) < 0)
			continue; /* devgated sees no reply and forks itself */
		(void)send_child(&next);
		forget(&next);
		if (forkloop_child(fn, &next) < 0)
			next.pid = 0;
	}
	_exit(0);
}
