// SPDX-License-Identifier: Apache-2.0
/*
 * Connection slots on the control socket (admit.h): counts connections by
 * uid and by authority, and says whether a newcomer gets in. It must not
 * touch a socket, read the clock or log: server.c does, and picks the
 * connection to cut when a verdict asks for room.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "admit.h"
#include "array.h"

void admit_init(struct admit *a, const struct admit_limits *lim)
{
	*a = (struct admit){ .lim = *lim };
}

void admit_free(struct admit *a)
{
	free(a->v);
	a->v = NULL;
	a->n = a->cap = 0;
}

size_t admit_readers_max(const struct admit_limits *lim)
{
	return lim->max_clients > lim->reserved ? lim->max_clients - lim->reserved : 1;
}

/* Returns uid's entry, or NULL when it holds no connection. */
static struct admit_uid *find(const struct admit *a, uid_t uid)
{
	for (size_t i = 0; i < a->n; i++) {
		if (a->v[i].uid == uid)
			return &a->v[i];
	}
	return NULL;
}

struct admit_uid admit_of(const struct admit *a, uid_t uid)
{
	const struct admit_uid *u = find(a, uid);

	return u ? *u : (struct admit_uid){ .uid = uid };
}

bool admit_uid_full(const struct admit *a, uid_t uid)
{
	return uid != 0 && admit_of(a, uid).conns >= a->lim.per_uid;
}

enum admit_verdict admit_check(const struct admit *a, uid_t uid, enum peer_authority auth)
{
	if (uid == 0)
		return ADMIT_YES;
	if (admit_uid_full(a, uid))
		return ADMIT_NO_UID;
	if (auth == PEER_READER && a->readers >= admit_readers_max(&a->lim))
		return ADMIT_NEED_READER;
	if (a->total >= a->lim.max_clients)
		return ADMIT_NEED_ROOM;
	return ADMIT_YES;
}

int admit_add(struct admit *a, uid_t uid, enum peer_authority auth)
{
	struct admit_uid *u = uid ? find(a, uid) : NULL;

	if (uid && !u) {
		if (ARRAY_GROW(a->v, a->n, a->cap) < 0)
			return -ENOMEM;
		u = &a->v[a->n++];
		*u = (struct admit_uid){ .uid = uid };
	}
	if (u)
		u->conns++;
	if (auth == PEER_READER)
		a->readers++;
	a->total++;
	return 0;
}

void admit_del(struct admit *a, uid_t uid, enum peer_authority auth, bool stream)
{
	struct admit_uid *u = uid ? find(a, uid) : NULL;

	if (u && u->conns)
		u->conns--;
	if (u && stream && u->streams)
		u->streams--;
	/* Gone from the table with its last connection: the table holds only the uids present. */
	if (u && !u->conns)
		*u = a->v[--a->n];
	if (auth == PEER_READER && a->readers)
		a->readers--;
	if (a->total)
		a->total--;
}

enum admit_verdict admit_stream_check(const struct admit *a, uid_t uid)
{
	if (uid == 0 || admit_of(a, uid).streams < a->lim.streams_per_uid)
		return ADMIT_YES;
	return ADMIT_NO_STREAM;
}

void admit_stream(struct admit *a, uid_t uid)
{
	struct admit_uid *u = uid ? find(a, uid) : NULL;

	if (u)
		u->streams++;
}
