/* SPDX-License-Identifier: Apache-2.0 */
/*
 * struct bpfgate, the state every piece of gate/ works on. Private to
 * gate/: other folders see only the opaque struct bpfgate of bpfgate.h.
 */
#ifndef DEVGATE_GATE_INT_H
#define DEVGATE_GATE_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "devgate.h"
#include "gateobj.h"
#include "keeper.h"

struct supersede;

/* The parts of the beside gate: its two instances and its lookout. */
enum beside_part {
	BESIDE_A,
	BESIDE_B,
	BESIDE_MARK,
	BESIDE_PARTS
};

struct bpfgate {
	char *pin_root;
	struct devgate *maps;	 /* owns the shared maps; no programs loaded */
	struct devgate *spare;	 /* a copy loaded ahead of need (gate for runc's kind) */
	struct dg_guard *guard;	 /* [major]: what dg_guarded_v1 holds */
	int map_fd[SHARED_MAPS]; /* the shared maps, by enum shared_map */
	uint32_t grants_id;
	bool sweep_due; /* counters released by key; a stray may remain */
	uint64_t last_sweep_ns;
	uint32_t counters_id; /* proves a program ours: gate and tally both count in it */
	struct keeper keeper;
	struct supersede *sup; /* guard.c's record of replaced runtime programs (LXC) */
	/* The shared programs (onegate.c); -1 where not loaded. */
	int gate_fd[DG_GATE_SETS];
	uint32_t gate_id[DG_GATE_SETS];
	int tally_fd;
	uint32_t tally_id;
	/* The beside gate, after the runtime's programs, in two instances: a move
	 * to last place attaches the other one first; -1: none. */
	int beside_fd[2];
	uint32_t beside_id[2];
	int mark_fd; /* its lookout, pre-order (need_mark); -1: none */
	uint32_t mark_id;
	bool need_mark;	    /* the kernel has BPF_F_PREORDER: ancestors' programs may run first */
	uint32_t mark_mode; /* how the lookout hands on what it saw (DG_MARK_*) */
	bool beside_on;	    /* new guards put the beside gate after the runtime's programs */
	int slots_fd[DG_GATE_SETS]; /* dg_slots<SET>_v1 */
	uint32_t slots_id[DG_GATE_SETS];
	uint64_t *slot_cg[DG_GATE_SETS]; /* [slot]: the cgroup using it, 0: free */
	uint32_t slot_top[DG_GATE_SETS]; /* every used slot is below */
};

#endif
