/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Stand-ins for the modules of devgated that touch the kernel (bpfgate,
 * nodes, target, cgroup, watch, state), linked instead of them into unit
 * tests of the lease transactions. They keep a model of what the kernel
 * would hold, so a test checks what a failed transaction left behind, and
 * they fail on request: fake_fail("guard_apply", 1, -EPERM) makes the
 * first guard_apply() call fail.
 */
#ifndef DEVGATE_KERNEL_FAKES_H
#define DEVGATE_KERNEL_FAKES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FAKE_MAX 256

struct fake_grant {
	uint64_t cgid;
	uint32_t major, minor;
};

struct fake_kernel {
	struct fake_grant grants[FAKE_MAX]; /* the grants map */
	size_t n_grants;
	uint64_t guarded[FAKE_MAX]; /* cgroups with a gate */
	size_t n_guarded;
	char nodes[FAKE_MAX][32]; /* node names in the (one) container's /dev */
	size_t n_nodes;
	uint64_t saved[FAKE_MAX]; /* lease records on disk */
	size_t n_saved;
	size_t watched;
	uint64_t pending;  /* cgroup of the grant journal, 0: none */
	uint64_t revoking; /* cgroup of the revoke journal, 0: none */
	uint64_t moving;   /* source cgroup of the move journal, 0: none */
	bool devgrants;	   /* dg_devgrants_v1: a non-GPU device is granted */
	/* Where targets resolve: every PID and cgroup is this one container. */
	uint64_t target_cgid;
	const char *target_cgroup;
};

extern struct fake_kernel fake;

void fake_reset(uint64_t cgid, const char *cgroup);
/* The nth call (1-based) of fn from now on returns r. */
void fake_fail(const char *fn, int nth, int r);

bool fake_has_grant(uint64_t cgid, uint32_t major, uint32_t minor);
bool fake_is_guarded(uint64_t cgid);
bool fake_has_node(const char *name);
bool fake_is_saved(uint64_t cgid);

#endif
