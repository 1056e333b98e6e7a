/* SPDX-License-Identifier: Apache-2.0 */
/*
 * devgate's BPF side: the shared maps, and the "guard" of one cgroup, i.e.
 * devgate's programs on it. Pins live under PIN_ROOT:
 *
 *   PIN_ROOT/dg_*_v1            shared maps (grants, counters, events,
 *                               devgrants: the flag for non-GPU grants, ...)
 *   PIN_ROOT/cg/CGID/gate-ORIG  gate standing in for runtime program ORIG
 *   PIN_ROOT/cg/CGID/slot-ORIG  its prog array holding ORIG
 *   PIN_ROOT/cg/CGID/gate-default  gate on a cgroup that had no program
 *   PIN_ROOT/cg/CGID/tally      the counting program, attached last
 *
 * Pins hold the prog arrays' user references (an unpinned array is flushed
 * when its last fd closes) and let a restarted daemon find its programs.
 */
#ifndef DEVGATE_BPFGATE_H
#define DEVGATE_BPFGATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "devgate.h"
#include "errors.h"
#include "gpu.h"

#include "paths.h"

struct bpfgate;

/*
 * Creates devgate's maps under pin_root or adopts them: from their pins, or,
 * with the pins gone, from the gates on leased_cgfds (cgroups the lease
 * records name). cgroot_fd: the cgroup v2 root, for the keeper.
 */
int bpfgate_open(const char *pin_root, const struct dg_inventory *inv, int cgroot_fd,
		 const int *leased_cgfds, size_t n_leased, struct bpfgate **ret,
		 struct dg_error *err);
/*
 * Makes the pin root (on bpffs, as bpfgate_open) and takes its lock, which
 * keeps every other devgated off it for as long as *ret stays open. Returns
 * 0, or a negative errno with err set (DG_E_STATE: another devgated holds it).
 */
int bpfgate_lock_root(const char *pin_root, int *ret, struct dg_error *err);
/* Pins the maps again if someone removed them; cheap when they are there. */
void bpfgate_repin(struct bpfgate *bg);
void bpfgate_free(struct bpfgate *bg);
const char *bpfgate_pin_root(const struct bpfgate *bg);

/* Allows the cgroup node->access on the node (read and write when 0). */
int bpfgate_grant_put(struct bpfgate *bg, uint64_t cgid, const struct dg_node *node);
/* bpfgate_grant_put of n nodes at once; on failure *ret_failed (< n) is the one that failed. */
int bpfgate_grants_put(struct bpfgate *bg, uint64_t cgid, const struct dg_node *nodes, size_t n,
		       size_t *ret_failed);
int bpfgate_grant_del(struct bpfgate *bg, uint64_t cgid, const struct dg_node *node);
/*
 * The gate looks non-GPU devices up in the grants map only while this flag
 * is set: set it before the first grant --device goes in.
 */
int bpfgate_devgrants_set(struct bpfgate *bg, bool any);
/* Sets the flag from the grants map (any non-GPU major); returns it (0 or 1). */
int bpfgate_devgrants_sync(struct bpfgate *bg);
/* GPU-class: the gate counts it and denies it unless granted (dg_guarded_v1). */
bool bpfgate_is_guarded(const struct bpfgate *bg, uint32_t major, uint32_t minor);
/* Writes the inventory's GPU-class devices (a rescan's) into dg_guarded_v1. */
int bpfgate_guard_sync(struct bpfgate *bg, const struct dg_inventory *inv);
/* The same for both inventories' devices: an old driver's majors stay guarded while leases
 * move off them (refresh.c). */
int bpfgate_guard_sync_both(struct bpfgate *bg, const struct dg_inventory *inv,
			    const struct dg_inventory *also);
/* All grant keys in the map; *ret is malloc'd. */
int bpfgate_grants_list(struct bpfgate *bg, struct dg_grant_key **ret, size_t *ret_n);

/* Loads the next gate ahead of need; call when idle. */
void bpfgate_prepare(struct bpfgate *bg);

int bpfgate_events_fd(const struct bpfgate *bg);
/* Denial events lost to a full ring buffer, summed over ncpus (possible CPUs). */
int bpfgate_events_dropped(const struct bpfgate *bg, int ncpus, uint64_t *ret);
int bpfgate_counters_fd(const struct bpfgate *bg);
/* Deletes the counters and rate-limit entries of cgid for each of nodes. */
int bpfgate_counters_drop(struct bpfgate *bg, uint64_t cgid, const struct dg_node *nodes, size_t n);
/* Whether a full sweep of stray counters is due (at most once a minute). */
bool bpfgate_sweep_due(struct bpfgate *bg, uint64_t now_ns);
/* Drops the counters of every cgroup keep() rejects; returns how many keys. */
int bpfgate_counters_sweep(struct bpfgate *bg, bool (*keep)(uint64_t cgid, const void *data),
			   const void *data);

/* The comm of the proof's prober, whose opens devgate's programs do not count; NULL: none. */
const char *bpfgate_proof_comm(void);

/* Route libbpf's messages into devgate's log (debug only with -v). */
void bpfgate_route_libbpf_log(void);

#endif
