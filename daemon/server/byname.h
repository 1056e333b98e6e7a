/* SPDX-License-Identifier: Apache-2.0 */
/* A request's container named the way users know it; private to server/. */
#ifndef DEVGATE_BYNAME_H
#define DEVGATE_BYNAME_H

#include <stdbool.h>
#include <stdint.h>

#include "core/daemon.h"
#include "wire.h"

struct byname_job;

/*
 * Where a grant, revoke or extend names its container by --container alone
 * and that is not a lease's label, starts a worker that resolves it through
 * the runtimes' state (names/names.h) and moves req into *ret, whose
 * end wakes d's loop with tag (server_lookup_event): 1. 0 when req needs
 * no lookup, or only runtimes' state files were read and req is rewritten
 * already: it goes on at once; negative errno and err when it is refused.
 */
int byname_start(struct daemon *d, struct dg_request *req, uint64_t tag, struct byname_job **ret,
		 struct dg_error *err);
uint64_t byname_job_tag(const struct byname_job *j);
/* True once j's worker has had its whole time. */
bool byname_job_late(const struct byname_job *j, uint64_t now_ns);

/*
 * Ends j (freed) and gives its request back in *ret, rewritten to the
 * cgroup the runtime names, keeping the runtime's name as the grant's
 * label: 0, or negative errno and err (late: the worker had its whole time
 * and is killed). *ret is the caller's to dg_request_done either way.
 */
int byname_finish(struct daemon *d, struct byname_job *j, bool late, struct dg_request *ret,
		  struct dg_error *err);

/* Kills j's worker and frees j with its request (its client left). */
void byname_job_free(struct daemon *d, struct byname_job *j);

/* Reaps killed workers that had not ended yet; never waits. */
void byname_reap(void);

/*
 * Every running container the configured runtimes list, proved from the
 * kernel (names_list), into out (strings in a). Changes nothing.
 */
int byname_list(struct daemon *d, struct dg_containers_reply *out, struct dg_arena *a,
		struct dg_error *err);

#endif
