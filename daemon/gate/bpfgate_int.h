/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What bpfgate.c (loading, maps) and guard.c (guarding cgroups) share, and
 * nothing else includes.
 */
#ifndef DEVGATE_BPFGATE_INT_H
#define DEVGATE_BPFGATE_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <bpf/libbpf.h>

#include "devgate.h"
#include "errors.h"
#include "devgate.skel.h"
#include "keeper.h"
#include "progfd.h"

#define MAX_PROGS 64 /* the kernel's limit per cgroup and attach type */
#define MAX_REPLACES 16
#define MAX_OWNERS 64
#define MAX_PENDING 32

/* The process that kept a runtime program open when devgate wrapped it. */
struct prog_owner {
	uint64_t cgid; /* 0: a free entry */
	uint32_t prog_id;
	struct progfd_proc proc;
};

/* A wrap whose runtime program's keeper is yet to be looked for (guard_idle). */
struct pending_owner {
	uint64_t cgid;
	uint32_t prog_id;
	int cgfd;
};

/* An attach that asked to replace old_id by new_id (guard_note_replace). */
struct replace_ask {
	uint64_t cgid; /* 0: a free entry */
	uint32_t old_id;
	uint32_t new_id;
};

struct bpfgate {
	char *pin_root;
	struct devgate *maps;	/* owns the shared maps; no programs loaded */
	struct devgate *spare;	/* a copy loaded ahead of need (gate for runc's kind) */
	struct dg_guard *guard; /* [major]: what dg_guarded_v1 holds */
	int guarded_fd;
	int grants_fd;
	int counters_fd;
	int events_fd;
	int ratelimit_fd;
	int drops_fd;
	int devgrants_fd; /* dg_devgrants_v1: any non-GPU device granted on the host */
	uint32_t grants_id;
	bool sweep_due; /* counters released by key; a stray may remain */
	uint64_t last_sweep_ns;
	uint32_t counters_id; /* proves a program ours: gate and tally both count in it */
	struct keeper keeper;
	struct replace_ask replaces[MAX_REPLACES]; /* a ring: the oldest is overwritten */
	unsigned int replaces_next;
	struct prog_owner owners[MAX_OWNERS]; /* a ring, like replaces */
	unsigned int owners_next;
	struct pending_owner pending[MAX_PENDING];
	unsigned int n_pending;
	/* The shared programs (onegate.c); -1 where not loaded. */
	int gate_fd[DG_GATE_SETS];
	uint32_t gate_id[DG_GATE_SETS];
	int tally_fd;
	uint32_t tally_id;
	int slots_fd[DG_GATE_SETS]; /* dg_slots<SET>_v1 */
	uint32_t slots_id[DG_GATE_SETS];
	int cgstate_fd;			 /* dg_cgstate_v1 */
	uint64_t *slot_cg[DG_GATE_SETS]; /* [slot]: the cgroup using it, 0: free */
	uint32_t slot_top[DG_GATE_SETS]; /* every used slot is below */
};

struct attached {
	uint32_t ids[MAX_PROGS];
	uint32_t n;
	uint32_t flags;
};

/* ROLE_MAPS creates or finds the shared maps; ROLE_PROGS loads gate and tally. */
enum role {
	ROLE_MAPS,
	ROLE_PROGS
};

static inline void devgate_destroyp(struct devgate **s)
{
	devgate__destroy(*s);
}

/* Opens and loads one copy of the object (see bpfgate.c). */
int bpfgate_load_copy(const struct bpfgate *bg, enum role role, bool has_runtime,
		      enum bpf_attach_type gate_eat, struct devgate **ret);
/* Loads set's shared gate over set's slots, and/or the shared tally. */
int bpfgate_load_shared(const struct bpfgate *bg, uint32_t set, enum bpf_attach_type gate_eat,
			bool gate, bool tally, struct devgate **ret);

/* onegate.c: the shared programs, their slots and the cgroups' storage. */
/* Loads the shared programs, or adopts them: from pins, or from leased_cgfds' gates. */
int onegate_open(struct bpfgate *bg, const int *leased_cgfds, size_t n_leased);
void onegate_close(struct bpfgate *bg);
void onegate_repin(const struct bpfgate *bg);
/* The set whose shared gate prog_id is, or -1. */
int onegate_set_of(const struct bpfgate *bg, uint32_t prog_id);
int onegate_state_get(const struct bpfgate *bg, uint64_t cgid, struct dg_cgstate *st);
int onegate_state_put(const struct bpfgate *bg, uint64_t cgid, const struct dg_cgstate *st);
int onegate_slot_take(struct bpfgate *bg, uint64_t cgid, int orig_fd, uint32_t *set,
		      uint32_t *slot);
void onegate_slot_drop(struct bpfgate *bg, uint32_t set, uint32_t slot);
uint32_t onegate_slot_prog(const struct bpfgate *bg, uint32_t set, uint32_t slot);
int onegate_slot_refill(const struct bpfgate *bg, uint32_t set, uint32_t slot, uint32_t orig_id);
void onegate_forget(struct bpfgate *bg, uint64_t cgid);
/* Cgroups that have storage (every cgroup a shared program was ever attached to). */
int onegate_list(const struct bpfgate *bg, uint64_t **ret, size_t *ret_n);

/* Tells a copy which container it serves, and for which runtime program. */
int bpfgate_set_self(struct devgate *skel, uint64_t cgid, uint32_t orig_id);
/* PIN_ROOT/cg/CGID */
int bpfgate_cg_dir(const struct bpfgate *bg, uint64_t cgid, char *buf, size_t len);
/* The device programs attached to cgfd (effective: inherited ones too). */
int bpfgate_query(int cgfd, bool effective, struct attached *ret);

#endif
