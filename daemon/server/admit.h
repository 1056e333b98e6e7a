/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Who gets a connection slot on the control socket. devgated accepts every
 * connection at once (the peer's credentials are known only after accept)
 * and then decides here: root always gets in, so the OCI hook and root's
 * devgatectl are never locked out; every other uid holds at most per_uid
 * connections and streams_per_uid streams; socket-group readers together
 * hold at most max_clients minus reserved, which keeps slots for root and
 * the admin-group. Pure bookkeeping, no I/O and no clock: server.c counts
 * its clients here, and cuts an idle one when the verdict asks for room.
 */
#ifndef DEVGATE_ADMIT_H
#define DEVGATE_ADMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "peer.h"

struct admit_limits {
	unsigned int max_clients;     /* connections at once; root gets in past it */
	unsigned int per_uid;	      /* connections of one uid other than root */
	unsigned int streams_per_uid; /* watch and events streams of one uid other than root */
	unsigned int reserved;	      /* of max_clients, the slots readers may not take */
};

struct admit_uid {
	uid_t uid;
	unsigned int conns;   /* connections it holds now */
	unsigned int streams; /* of those, the streaming ones */
};

struct admit {
	struct admit_limits lim;
	struct admit_uid *v; /* uids other than root that hold a connection */
	size_t n, cap;
	size_t total;	/* connections, root's included */
	size_t readers; /* connections of socket-group readers */
	/* server.c's log of refusals and cuts: one line a second, the rest counted */
	uint64_t logged_ns;
	unsigned int unlogged;
};

enum admit_verdict {
	ADMIT_YES,	   /* there is room */
	ADMIT_NEED_READER, /* the readers' share is full: in if a reader's idle connection goes */
	ADMIT_NEED_ROOM,   /* max_clients is reached: in if a less valuable connection goes */
	ADMIT_NO_UID,	   /* the uid holds per_uid connections already: refused */
	ADMIT_NO_STREAM,   /* the uid holds streams_per_uid streams already (admit_stream) */
};

void admit_init(struct admit *a, const struct admit_limits *lim);
void admit_free(struct admit *a);

/* Whether uid holds per_uid connections already (never root): its next is refused. */
bool admit_uid_full(const struct admit *a, uid_t uid);
/* Whether a newcomer of uid with authority auth may have a connection now. */
enum admit_verdict admit_check(const struct admit *a, uid_t uid, enum peer_authority auth);
/* Counts a connection that got in; -ENOMEM (then it must not be served). */
int admit_add(struct admit *a, uid_t uid, enum peer_authority auth);
/* Counts a connection's end; stream says whether it was streaming. */
void admit_del(struct admit *a, uid_t uid, enum peer_authority auth, bool stream);
/* ADMIT_YES when uid may start one more stream, else ADMIT_NO_STREAM. */
enum admit_verdict admit_stream_check(const struct admit *a, uid_t uid);
/* Counts one of uid's connections as streaming from now on. */
void admit_stream(struct admit *a, uid_t uid);
/* The connections and streams uid holds (0 for root, which is not counted by uid). */
struct admit_uid admit_of(const struct admit *a, uid_t uid);
/* The most connections socket-group readers may hold together (at least 1). */
size_t admit_readers_max(const struct admit_limits *lim);

#endif
