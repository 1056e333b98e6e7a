// SPDX-License-Identifier: Apache-2.0
/*
 * Sends and receives one message with descriptors over a unix socket
 * (SCM_RIGHTS). Used by devgated, the zygote and confined helpers, so it
 * must not allocate or log, and must receive with recvmsg only (the
 * helper's filter allows no read).
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "fdpass.h"

int fds_send(int sock, const void *buf, size_t len, const int *fds, size_t n)
{
	char control[CMSG_SPACE(FDPASS_MAX * sizeof(int))] = { 0 };
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr mh = {
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = control,
		.msg_controllen = CMSG_SPACE(n * sizeof(int)),
	};
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);

	if (n < 1 || n > FDPASS_MAX)
		return -EINVAL;
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(n * sizeof(int));
	memcpy(CMSG_DATA(c), fds, n * sizeof(int));
	return sendmsg(sock, &mh, MSG_NOSIGNAL) == (ssize_t)len ? 0 : -errno;
}

int fds_recv(int sock, void *buf, size_t len, int fds[FDPASS_MAX])
{
	char control[CMSG_SPACE(FDPASS_MAX * sizeof(int))];
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct msghdr mh = {
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = control,
		.msg_controllen = sizeof(control),
	};
	struct cmsghdr *c;
	ssize_t got = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
	size_t n;

	if (got < 0)
		return -errno;
	if (got != (ssize_t)len)
		return -EPIPE;
	c = CMSG_FIRSTHDR(&mh);
	if (!c || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
	    c->cmsg_len < CMSG_LEN(sizeof(int)))
		return 0;
	n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
	if (n > FDPASS_MAX)
		n = FDPASS_MAX;
	memcpy(fds, CMSG_DATA(c), n * sizeof(int));
	return (int)n;
}
