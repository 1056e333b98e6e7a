/* SPDX-License-Identifier: Apache-2.0 */
/*
 * devgate's BPF object (bpf/devgate.bpf.c) through its skeleton: the maps
 * every copy shares, their names, and loading the object in its three
 * roles. Private to gate/.
 */
#ifndef DEVGATE_GATEOBJ_H
#define DEVGATE_GATEOBJ_H

#include <stdbool.h>
#include <stdint.h>
#include <bpf/libbpf.h>

#include "devgate.h"
#include "devgate.skel.h"

/* The maps every copy of the object shares, pinned under the pin root. */
enum shared_map {
	MAP_GRANTS,
	MAP_COUNTERS,
	MAP_EVENTS,
	MAP_RATELIM,
	MAP_DROPS,
	MAP_DEVGRANTS,
	MAP_CGSTATE,
	MAP_GUARDED,
	MAP_KNOWN,
	MAP_MARK,
	MAP_TMARK,
	SHARED_MAPS
};

struct shared_map_name {
	const char *name; /* its pin name, and its name in the kernel */
	const char *was;  /* the pin name of an earlier release, or NULL */
};

/* By enum shared_map; every name is checked to fit the kernel's 15 characters. */
extern const struct shared_map_name gateobj_names[SHARED_MAPS];

static inline void devgate_destroyp(struct devgate **s)
{
	devgate__destroy(*s);
}

/*
 * The comm the proof's prober takes, random per run (15 characters), which
 * the programs loaded from now on neither count nor report; NULL without
 * one.
 */
const char *gateobj_proof_comm(void);

/* The skeleton's shared maps, by enum shared_map. */
void gateobj_maps(const struct devgate *skel, struct bpf_map *ret[SHARED_MAPS]);

/*
 * Loads the copy that owns the shared maps, and no program: libbpf creates
 * each map, or reuses its pin under pin_root. A map whose adopt[] fd is not
 * -1 is that map instead (adopt may be NULL).
 */
int gateobj_load_maps(const char *pin_root, const int *adopt, struct devgate **ret);
/*
 * Loads a copy for one cgroup, a gate and a tally over the maps of
 * maps_owner. has_runtime: the gate tail-calls the runtime program put in
 * its slot (gateobj_set_slot). The gate's expected_attach_type must be that
 * of the program it is to take in.
 */
int gateobj_load_copy(const char *pin_root, const struct devgate *maps_owner, bool has_runtime,
		      enum bpf_attach_type gate_eat, struct devgate **ret);
/* Loads set's shared gate over the prog array slots_fd, and/or the shared tally. */
int gateobj_load_shared(const char *pin_root, const struct devgate *maps_owner, int slots_fd,
			uint32_t set, enum bpf_attach_type gate_eat, bool gate, bool tally,
			struct devgate **ret);
/*
 * Loads the shared beside gate (bpf/devgate.bpf.c), which needs no prog
 * array, and with mark its lookout devgate_mark; need_mark (DG_MARK_*):
 * how the gate reads what the lookout saw (a kernel with BPF_F_PREORDER).
 */
int gateobj_load_beside(const char *pin_root, const struct devgate *maps_owner, bool mark,
			uint32_t need_mark, struct devgate **ret);
/* The need_mark that beside gate or lookout prog_fd was loaded with (DG_MARK_*); -1: unknown. */
int gateobj_need_mark_of(int prog_fd);
/* Tells a copy which container it serves, and for which runtime program. */
int gateobj_set_self(struct devgate *skel, uint64_t cgid, uint32_t orig_id);
/* Puts runtime program orig_fd in a copy's slot; -EINVAL: not of the gate's attach type. */
int gateobj_set_slot(struct devgate *skel, int orig_fd);
/* The kernel's id of map fd; 0 when unknown. */
uint32_t gateobj_map_id(int fd);

#endif
