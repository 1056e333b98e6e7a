/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Who is on the other end of a control connection, and what they may do:
 * root and admin-group members may change leases; socket-group members
 * may only read. Decided once, at accept, from the kernel's record of the
 * peer (SO_PEERCRED, SO_PEERGROUPS), never from anything the peer says.
 *
 * Where the kernel has SO_PEERPIDFD (6.5+) the peer also holds a pidfd of
 * the process that connected: its PID, logged later, is then known to be
 * that process's still, or marked "(exited)" once it is not.
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
	int pidfd; /* the connecting process, or -1 where the kernel gives none */
	enum peer_authority authority;
};

/*
 * Reads fd's peer: its uid, gid and PID, with no authority yet. Cheap, so
 * that a uid over its connection limit is refused before the rest is read.
 */
int peer_identify(int fd, struct peer *ret);
/* Decides p's authority under the configured groups, and takes a pidfd of it. */
void peer_authorize(int fd, gid_t socket_gid, gid_t admin_gid, struct peer *p);
/* Closes what peer_authorize opened; call once per peer peer_identify filled. */
void peer_done(struct peer *p);
/* Whether the process behind pidfd has exited (false without a pidfd). */
bool peer_exited(int pidfd);
/* " (exited)" when the peer's PID no longer names the process that connected. */
const char *peer_pid_note(int pidfd);
/* Whether uid/gid/groups put a peer in group gid (pure, unit-tested). */
bool peer_in_group(gid_t gid, gid_t primary, const gid_t *groups, size_t n);

#endif
