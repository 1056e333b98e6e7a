/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The shared programs (one gate per set, one tally), the slots of the sets'
 * prog arrays and each cgroup's dg_cgstate_v1 storage. Private to gate/.
 */
#ifndef DEVGATE_ONEGATE_H
#define DEVGATE_ONEGATE_H

#include <stddef.h>
#include <stdint.h>

#include "gate_int.h"
#include "pinned.h"

/*
 * Loads the shared programs, or adopts them: from their pins, or, with the
 * pins gone, from the gates on leased_cgfds. Returns 0 or -errno; on error
 * the caller calls onegate_close and every cgroup gets a copy of its own.
 */
int onegate_open(struct bpfgate *bg, const int *leased_cgfds, size_t n_leased);
/* Leaves bg as without shared programs: every fd -1. */
void onegate_close(struct bpfgate *bg);
/* Pins the sets' arrays and the shared programs again where their pins went. */
void onegate_repin(const struct bpfgate *bg);
/* The set whose shared gate prog_id is, or -1. */
int onegate_set_of(const struct bpfgate *bg, uint32_t prog_id);
/* Which instance of the beside gate prog_id is (enum beside_part), or -1. */
int onegate_beside_of(const struct bpfgate *bg, uint32_t prog_id);
/* The set whose prog array has the kernel name name (dg_slots<SET>_v1), or -1. */
int onegate_array_set(const char *name);
int onegate_state_get(const struct bpfgate *bg, uint64_t cgid, struct dg_cgstate *st);
int onegate_state_put(const struct bpfgate *bg, uint64_t cgid, const struct dg_cgstate *st);
/*
 * Puts runtime program orig_fd in a free slot of the first set whose prog
 * array takes it, for cgid; *set and *slot say where. -EINVAL: no set takes
 * it; -ENOSPC: the set is full.
 */
int onegate_slot_take(struct bpfgate *bg, uint64_t cgid, int orig_fd, uint32_t *set,
		      uint32_t *slot);
void onegate_slot_drop(struct bpfgate *bg, uint32_t set, uint32_t slot);
/* Points set's field of cgid's storage at slot (0: none), dropping a slot it replaces. */
int onegate_state_point(struct bpfgate *bg, uint64_t cgid, uint32_t set, uint32_t slot,
			uint32_t orig_id);
/* Lets go of every slot of cgid and clears its storage. */
void onegate_forget(struct bpfgate *bg, uint64_t cgid);
/* Cgroups that have storage (every cgroup a shared program was ever attached to). */
int onegate_list(const struct bpfgate *bg, uint64_t **ret, size_t *ret_n);
/* Appends the shared programs attached to cgfd to out (up to max), described from the kernel. */
int onegate_read(const struct bpfgate *bg, uint64_t cgid, int cgfd, struct pinned *out, size_t max,
		 size_t *n);
/* A shared gate's slot and storage fields go: its runtime program is back, or gone. */
void onegate_release(struct bpfgate *bg, uint64_t cgid, const struct pinned *p);
/* Refills a shared gate's emptied slot with its runtime program (the keeper holds it). */
void onegate_refill(const struct bpfgate *bg, uint64_t cgid, const struct pinned *p);

#endif
