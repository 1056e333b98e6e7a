/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Who is on the other end of a control connection, and what they may do:
 * root and admin-group members may change leases; socket-group members
 * may only read. Decided once, at accept, from the kernel's record of the
 * peer (SO_PEERCRED, SO_PEERGROUPS), never from anything the peer says.
 */
#ifndef DEVGATE_PEER_H
#define DEVGATE_PEER_H

#include <stdbool.h>
#include <sys/types.h>

enum peer_authority {
	PEER_NONE,   /* may not talk to devgated */
	PEER_READER, /* list, status, watch, events, metrics, ping */
	PEER_ADMIN,  /* everything */
};

struct peer {
	uid_t uid;
	gid_t gid;
	pid_t pid;
	enum peer_authority authority;
};

/* Reads fd's peer and decides its authority under the configured groups. */
int peer_identify(int fd, gid_t socket_gid, gid_t admin_gid, struct peer *ret);
/* Whether uid/gid/groups put a peer in group gid (pure, unit-tested). */
bool peer_in_group(gid_t gid, gid_t primary, const gid_t *groups, size_t n);

#endif
