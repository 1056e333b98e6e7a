/* SPDX-License-Identifier: Apache-2.0 */
/* devgate's programs on one cgroup: see guard.c and bpfgate.h's pin layout. */
#ifndef DEVGATE_GUARD_H
#define DEVGATE_GUARD_H

#include "bpfgate.h"

struct guard_info {
	unsigned int wrapped;	     /* runtime programs wrapped by this call */
	unsigned int gates;	     /* devgate gates on the cgroup now */
	unsigned int ancestor_progs; /* device programs on ancestors (warning) */
	int tally;		     /* 1 when the tally is attached */
	uint64_t settled;   /* guard_digest() when found settled; 0: this call changed them */
	uint64_t effective; /* foreign_effective_digest() as the call left the cgroup */
};

/*
 * Makes cgroup cgfd gated: every runtime program on it is replaced by a gate
 * (atomically, BPF_F_REPLACE), a default gate is attached if it had none,
 * and the tally sits last. Idempotent; re-wraps programs a runtime attached
 * since the last call and forgets gates a runtime removed.
 */
int guard_apply(struct bpfgate *bg, uint64_t cgid, int cgfd, struct guard_info *info,
		struct dg_error *err);
/*
 * guard_apply for a cgroup whose programs were last found settled as
 * digest known (0: not known): when one query finds those very programs
 * and no runtime's replace of them is on record, the full check is spared
 * (info then counts no gates nor tally: the pins are not read).
 */
int guard_ensure(struct bpfgate *bg, uint64_t cgid, int cgfd, uint64_t known,
		 struct guard_info *info, struct dg_error *err);
/*
 * Puts the runtime programs back and removes devgate's; cgfd -1 if gone.
 * 1 when something of devgate's was there, 0 when nothing was.
 */
int guard_remove(struct bpfgate *bg, uint64_t cgid, int cgfd, struct dg_error *err);
/*
 * 1 when cgfd carries a device program that devgate has not wrapped. digest
 * (may be NULL) gets guard_digest() of the very programs it judged.
 */
int guard_needed(struct bpfgate *bg, uint64_t cgid, int cgfd, uint64_t *digest);
/*
 * An attach on cgid asked to replace runtime program old_id by new_id
 * (attach_watch). Where old_id is behind a gate the kernel refused it; if
 * the runtime then attaches new_id anyway (LXC falls back to appending),
 * the next guard_apply drops old_id's gate, as the replace meant.
 */
void guard_note_replace(struct bpfgate *bg, uint64_t cgid, uint32_t old_id, uint32_t new_id);
/*
 * Loads the shared gates and tally (or adopts them: pinned, or on the
 * cgroups leased_cgfds, which lost their pins); after bpfgate_open. Without
 * them every cgroup gets its own copy. beside: new guards put the beside
 * gate after the runtime's programs (gate-mode = beside).
 */
void guard_init(struct bpfgate *bg, const int *leased_cgfds, size_t n_leased, bool beside);
/* Pins the shared programs and arrays again where they went. */
void guard_repin(struct bpfgate *bg);
/* Before bpfgate_free. */
void guard_fini(struct bpfgate *bg);
/* Work put off from the grants' path; call when idle. */
void guard_idle(struct bpfgate *bg);
/* cgroup ids that have a pin directory or shared programs' storage. */
int guard_list(struct bpfgate *bg, uint64_t **ret, size_t *ret_n);

/*
 * The device programs attached to cgfd now, in one number (their ids in
 * order and the attach flags; never 0): cheap enough to compare often.
 */
int guard_digest(int cgfd, uint64_t *ret);

#endif
