/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Types shared by the BPF programs and user space. Plain fixed-width fields,
 * explicit padding, no pointers: the layout is the ABI of the pinned maps.
 * Change a struct and you must rename its map (see DG_MAPS_VERSION).
 */
#ifndef DEVGATE_BPF_H
#define DEVGATE_BPF_H

#include <linux/types.h>

/* Bumped whenever a pinned map's key or value layout changes. */
#define DG_MAPS_VERSION 1

#define DG_MAX_GRANTS 65536
#define DG_MAX_COUNTERS 65536
#define DG_EVENTS_BYTES (256 * 1024)
#define DG_EVENT_INTERVAL_NS 1000000000ull /* one event per key per second */

/* Device type and access bits, as in struct bpf_cgroup_dev_ctx. */
#define DG_DEV_BLOCK 1
#define DG_DEV_CHAR 2
#define DG_ACC_MKNOD 1
#define DG_ACC_READ 2
#define DG_ACC_WRITE 4

/*
 * dg_guarded_v1: which devices are GPU-class, indexed by major. all: every
 * minor (NVIDIA's, the kfd's); else the minors set in the bitmap (DRM: the
 * host's own display devices share major 226 with GPUs and stay the
 * runtime's). devgated fills it from its inventory.
 */
#define DG_GUARD_MAJORS 4096 /* majors are 12 bits */
#define DG_GUARD_MINORS 256  /* a DRM GPU with a larger minor is refused */

struct dg_guard {
	__u64 minors[DG_GUARD_MINORS / 64];
	__u32 all;
	__u32 pad;
};

struct dg_grant_key {
	__u64 cgroup_id;
	__u32 type;
	__u32 major;
	__u32 minor;
	__u32 pad;
};

struct dg_grant_val {
	__u32 access; /* DG_ACC_* bits granted */
	__u32 pad;
};

struct dg_count_key {
	__u64 cgroup_id;
	__u32 major;
	__u32 minor;
	__u16 type;
	__u16 access;
	__u32 pad;
};

/* Per-CPU; user space sums the CPUs. */
struct dg_count_val {
	__u64 granted; /* gate: allowed by a devgate grant */
	__u64 passed;  /* gate: GPU-class access handed to the runtime's own program */
	__u64 allowed; /* tally: GPU-class access allowed in the end */
	__u64 denied;  /* tally: GPU-class access denied in the end */
};

struct dg_event {
	__u64 cgroup_id;
	__u64 ts_ns; /* CLOCK_MONOTONIC (bpf_ktime_get_ns) */
	__u32 type;
	__u32 major;
	__u32 minor;
	__u32 access;
};

/*
 * A copy's own state, in its "self" map: the container it serves and the
 * runtime program its gate stands in for (0: none). The map lives as long
 * as the program, pins or not, so a restarted devgated recovers both from
 * the kernel (bpfgate.c, own_prog()).
 */
struct dg_self {
	__u64 cgroup_id;
	__u32 orig_id;
	__u32 pad;
};

/*
 * Shared programs: one set of gates per expected_attach_type a runtime
 * loads with (0: runc, crun, LXC; 1: BPF_CGROUP_DEVICE, libbpf loaders).
 * DG_MAX_SLOTS runtime programs per set; slot 0 means none.
 */
#define DG_GATE_SETS 2
#define DG_MAX_SLOTS 65536

/* Per cgroup (dg_cgstate_v1, cgroup storage keyed by cgroup id). */
struct dg_cgstate {
	__u64 cgroup_id;	  /* 0 until devgated names the cgroup */
	__u32 slot[DG_GATE_SETS]; /* set N's gate: its runtime program's slot, 0: none */
	__u32 orig[DG_GATE_SETS]; /* and that program's id, to refill an emptied slot */
};

/* attach_watch.bpf.c: someone else changed a cgroup's device programs. */
#define DG_ATTACH_EVENTS_BYTES (64 * 1024)
#define DG_ATTACH_ATTACHED 1
#define DG_ATTACH_DETACHED 2

struct dg_attach_event {
	__u64 cgroup_id;
	__u64 ts_ns;	  /* CLOCK_MONOTONIC */
	__u32 what;	  /* DG_ATTACH_* */
	__u32 pid;	  /* who did it */
	__u32 prog_id;	  /* the program attached or detached; 0: unknown */
	__u32 replace_id; /* attach: the program it was to replace (BPF_F_REPLACE), or 0 */
};

struct dg_ratelimit_key {
	__u64 cgroup_id;
	__u32 major;
	__u32 minor;
};

#endif
