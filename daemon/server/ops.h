/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One decoded request in, one reply struct out. ops.c is the only place
 * that knows which module serves which operation; it also accounts every
 * request in the metrics and logs each refusal once.
 */
#ifndef DEVGATE_OPS_H
#define DEVGATE_OPS_H

#include "core/daemon.h"
#include "wire.h"

/* Who asks, as the server saw the peer. */
struct ops_peer {
	uid_t uid;
	pid_t pid;
	int pidfd;  /* the peer's, or -1: tells whether pid still names it */
	bool admin; /* may change leases (root or admin-group) */
};

/*
 * Serves req for peer: checks that peer may ask it, runs its handler,
 * counts it and logs a refusal. Returns 0 with reply filled (strings in a),
 * or < 0 with err set.
 */
int ops_dispatch(struct daemon *d, const struct ops_peer *peer, const struct dg_request *req,
		 union dg_reply *reply, struct dg_arena *a, struct dg_error *err);
/*
 * Returns whether a request that failed with r and err is a grant --wait
 * whose GPUs are busy: it waits in the queue (waiting.c) instead of being
 * refused. ops_wait_check then says whether it may wait: a request that
 * could never be served may not (that refusal is counted and logged here),
 * and one that may gets *ret_pidfd, its target's process.
 */
bool ops_may_wait(const struct dg_request *req, int r, const struct dg_error *err);
int ops_wait_check(struct daemon *d, const struct ops_peer *peer, const struct dg_request *req,
		   int *ret_pidfd, struct dg_error *err);
/* Returns whether a request that succeeded turns its connection into an event stream. */
bool ops_streams(const struct dg_request *req);

#endif
