/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The prober: a short-lived process that joins a container's cgroups and
 * opens device nodes there, so the kernel says what the container gets.
 * grant/proof.c runs it.
 */
#ifndef DEVGATE_PROBER_H
#define DEVGATE_PROBER_H

#include <stddef.h>
#include <stdint.h>

#include "errors.h"
#include "gpu.h"

/* Where one run's time went, in microseconds. */
struct prober_times {
	uint32_t clone_us;  /* the clone system call */
	uint32_t to_run_us; /* from the clone to the prober's first step: waiting for a CPU */
	uint32_t joins_us;  /* its write to the v1 devices cgroup.procs (and the fallback's) */
	uint32_t opens_us;  /* its opens */
	uint32_t reaped_us; /* from its last step to devgated's reaping it */
};

/* How one run went: where it stopped, and each node's errno (0: it opened). */
struct prober_result {
	int join_v2; /* errno of joining the v2 cgroup (clone3, or the fallback's cgroup.procs), 0:
			joined */
	int join_v1; /* errno of the write to the v1 devices cgroup.procs, 0: joined or none */
	bool timed_out;
	bool no_answer; /* it ended before it answered (killed by someone else) */
	bool frozen;	/* the cgroup was or became frozen: the prober was killed at once */
	int err[DG_MAX_NODES];
	struct prober_times times; /* set when it answered */
};

/*
 * Opens each of nodes (n of them, by their numbers and access) from a
 * process in cgroup v2 cgfd (-1: none, a host with cgroup v1 alone) and,
 * with v1_procs_fd not -1, in that v1
 * devices cgroup (its cgroup.procs, open for writing). The nodes live in a
 * root-only directory of devgated's own, made once per node and kept
 * until prober_release(). comm (may be NULL) is the name the prober takes,
 * which devgate's programs do not count (bpfgate_proof_comm()). Waits at
 * most timeout_ms, less when the cgroup is or becomes frozen, then kills
 * the prober; it is always reaped before this returns. Fails with err set
 * only when it could not run at all.
 */
int prober_run(int cgfd, int v1_procs_fd, const char *comm, const struct dg_node *nodes, size_t n,
	       int timeout_ms, struct prober_result *ret, struct dg_error *err);

/* Removes the probe nodes and their directory (devgated's exit). */
void prober_release(void);

#endif
