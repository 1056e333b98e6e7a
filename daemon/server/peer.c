// SPDX-License-Identifier: Apache-2.0
/*
 * Who connected to the control socket, read from the kernel (peer.h). It
 * must never trust what the peer says about itself: only the socket's
 * credentials count.
 */
#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/config.h"
#include "peer.h"

#define PEER_GROUPS_MAX 256

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77 /* Linux 6.5 */
#endif

void peer_done(struct peer *p)
{
	if (p->pidfd >= 0)
		close(p->pidfd);
	p->pidfd = -1;
}

/* A pidfd turns readable once its process has exited; poll tells without waiting. */
bool peer_exited(int pidfd)
{
	struct pollfd pfd = { .fd = pidfd, .events = POLLIN };

	return pidfd >= 0 && poll(&pfd, 1, 0) > 0;
}

const char *peer_pid_note(int pidfd)
{
	return peer_exited(pidfd) ? " (exited)" : "";
}

/*
 * Returns a pidfd of the connecting process, or -1. A pidfd names the
 * process itself, where a PID read later may name another process by then.
 * On older kernels (ENOPROTOOPT, EINVAL), with a peer gone already (ESRCH)
 * or with no descriptors left, the peer is served without one.
 */
static int peer_pidfd(int fd)
{
	int pidfd = -1;
	socklen_t len = sizeof(pidfd);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) < 0 || len != sizeof(pidfd))
		return -1;
	return pidfd;
}

bool peer_in_group(gid_t gid, gid_t primary, const gid_t *groups, size_t n)
{
	if (gid == DG_NO_GID)
		return false;
	if (primary == gid)
		return true;
	for (size_t i = 0; i < n; i++) {
		if (groups[i] == gid)
			return true;
	}
	return false;
}

int peer_identify(int fd, struct peer *ret)
{
	socklen_t len = sizeof(struct ucred);
	struct ucred cred;

	*ret = (struct peer){ .pidfd = -1, .authority = PEER_NONE };
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
		return -errno;
	ret->uid = cred.uid;
	ret->gid = cred.gid;
	ret->pid = cred.pid;
	return 0;
}

void peer_authorize(int fd, gid_t socket_gid, gid_t admin_gid, struct peer *p)
{
	gid_t groups[PEER_GROUPS_MAX];
	socklen_t glen = sizeof(groups);
	size_t n = 0;

	p->pidfd = peer_pidfd(fd);
	if (p->uid == 0) {
		p->authority = PEER_ADMIN;
		return;
	}
	/* The groups the peer had at connect; more than we hold: none counted. */
	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &glen) == 0)
		n = glen / sizeof(gid_t);
	if (peer_in_group(admin_gid, p->gid, groups, n))
		p->authority = PEER_ADMIN;
	else if (peer_in_group(socket_gid, p->gid, groups, n))
		p->authority = PEER_READER;
	else
		p->authority = PEER_NONE;
}
