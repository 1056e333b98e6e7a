/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Types shared by the BPF programs and user space. Plain fixed-width fields,
 * explicit padding, no pointers: the layout is the ABI of the pinned maps.
 * Change a struct and you must rename its map (see DG_MAPS_VERSION). The
 * compiler checks the layout on both sides (DG_ABI_* at the end of this
 * file), so a change that forgets to do so fails the build.
 */
#ifndef DEVGATE_BPF_H
#define DEVGATE_BPF_H

#include <linux/types.h>

/*
 * Bumped whenever a pinned map's key or value layout changes. Every pinned
 * map and program is named with it ("_v1"), so a devgated of a new layout
 * never adopts the pins of an old one: DG_V(dg_grants) is the identifier
 * dg_grants_v1 (the BPF programs' and the skeleton's name for the map),
 * DG_VNAME(dg_grants) the string "dg_grants_v1" (its pin and kernel name).
 * A name must fit the kernel's 15 characters (BPF_OBJ_NAME_LEN): the kernel
 * cuts a longer one short, and the map could then never be found by name.
 */
#define DG_MAPS_VERSION 1
#define DG_QUOTE(x) DG_QUOTE_(x)
#define DG_QUOTE_(x) #x
#define DG_VSUFFIX "_v" DG_QUOTE(DG_MAPS_VERSION)
#define DG_V(base) DG_V_(base, DG_MAPS_VERSION)
#define DG_V_(base, v) DG_V__(base, v)
#define DG_V__(base, v) base##_v##v
#define DG_VNAME(base) #base DG_VSUFFIX

#define DG_MAX_GRANTS 65536
#define DG_MAX_COUNTERS 65536
#define DG_MAX_KNOWN 16384 /* the inventory's nodes: GPUs, control nodes, MIG capabilities */
#define DG_EVENTS_BYTES (256 * 1024)
#define DG_EVENT_INTERVAL_NS 1000000000ull /* one event per key per second */
/*
 * At most this many denial events per cgroup in a window of 2^30 ns (about
 * a second), whatever the devices: one container cannot fill the ring that
 * every container's events share.
 */
#define DG_CGROUP_EVENTS 64
#define DG_EVENT_WINDOW_SHIFT 30

/*
 * DG_DEV_OTHER as both major and minor of a counters key: every device of
 * the cgroup (with that type and access) that is no node of the inventory
 * (dg_known_v1), one key, so a container that opens minor after minor of a
 * GPU major cannot fill the map every container shares. As the major of a
 * rate-limit key (minor 0): the cgroup's budget of denial events in the
 * current window, (window << 32) | events.
 */
#define DG_DEV_OTHER 0xffffffffu

/* Device type and access bits, as in struct bpf_cgroup_dev_ctx. */
#define DG_DEV_BLOCK 1
#define DG_DEV_CHAR 2
#define DG_ACC_MKNOD 1
#define DG_ACC_READ 2
#define DG_ACC_WRITE 4

/*
 * The GPU-class devices map (dg_guarded_v1): which devices are GPU-class, indexed by major. all:
 * every minor (NVIDIA's, the kfd's); else the minors set in the bitmap (DRM: the host's own display
 * devices share major 226 with GPUs and stay the runtime's). devgated fills it from its inventory.
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
 * the kernel (daemon/gate/own.c).
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

/*
 * How the beside gate learns what its lookout saw (the programs' need_mark):
 * no lookout (a kernel without BPF_F_PREORDER), per-CPU slots by thread
 * (dg_mark_v1; kernels whose cgroup/dev programs lack task storage), or the
 * task's own record (dg_tmark_v1).
 */
#define DG_MARK_NONE 0
#define DG_MARK_SLOTS_CPU 1
#define DG_MARK_TASK 2

/* dg_mark_v1 (per CPU, by thread id & (DG_MARK_SLOTS - 1)): what devgate_mark saw. */
#define DG_MARK_SLOTS 16
struct dg_mark {
	__u64 pid_tgid;
	__u32 denied; /* an ancestor's pre-order program denied the access */
	__u32 pad;
};

/*
 * dg_tmark_v1 (task storage): the thread's last access as devgate_mark saw
 * it, and the cgroups whose beside gate took it (DG_TMARK_USED nested
 * guarded cgroups at most): taken once, so that a record left from an
 * earlier access (the lookout since detached) never stands for this one.
 */
#define DG_TMARK_USED 4
struct dg_tmark {
	__u32 major;
	__u32 minor;
	__u32 access_type; /* as in bpf_cgroup_dev_ctx: type | access << 16 */
	__u32 denied;
	__u64 used[DG_TMARK_USED]; /* cgroup ids; 0: free */
};

/* Per cgroup (the dg_cgstate_v1 map, cgroup storage keyed by cgroup id). */
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

/* The known devices map (dg_known_v1): a node of the inventory; the value is unused (1). */
struct dg_dev_key {
	__u32 major;
	__u32 minor;
};

struct dg_ratelimit_key {
	__u64 cgroup_id;
	__u32 major;
	__u32 minor;
};

/*
 * The layout above, checked by the compiler on both sides: clang -target
 * bpf for the programs, the C compiler for devgated and the tools. Each
 * struct's size and each member's offset and size; __builtin_offsetof needs
 * no header, so the BPF side includes nothing more.
 */
#define DG_ABI_SIZE(type, size)                       \
	_Static_assert(sizeof(struct type) == (size), \
		       "struct " #type " changed size: rename its map (DG_MAPS_VERSION)")
#define DG_ABI_FIELD(type, member, offset, size)                              \
	_Static_assert(__builtin_offsetof(struct type, member) == (offset) && \
			       sizeof(((struct type *)0)->member) == (size),  \
		       "struct " #type " member " #member                     \
		       " moved: rename its map (DG_MAPS_VERSION)")

DG_ABI_SIZE(dg_guard, 40);
DG_ABI_FIELD(dg_guard, minors, 0, 32);
DG_ABI_FIELD(dg_guard, all, 32, 4);
DG_ABI_FIELD(dg_guard, pad, 36, 4);

DG_ABI_SIZE(dg_grant_key, 24);
DG_ABI_FIELD(dg_grant_key, cgroup_id, 0, 8);
DG_ABI_FIELD(dg_grant_key, type, 8, 4);
DG_ABI_FIELD(dg_grant_key, major, 12, 4);
DG_ABI_FIELD(dg_grant_key, minor, 16, 4);
DG_ABI_FIELD(dg_grant_key, pad, 20, 4);

DG_ABI_SIZE(dg_grant_val, 8);
DG_ABI_FIELD(dg_grant_val, access, 0, 4);
DG_ABI_FIELD(dg_grant_val, pad, 4, 4);

DG_ABI_SIZE(dg_count_key, 24);
DG_ABI_FIELD(dg_count_key, cgroup_id, 0, 8);
DG_ABI_FIELD(dg_count_key, major, 8, 4);
DG_ABI_FIELD(dg_count_key, minor, 12, 4);
DG_ABI_FIELD(dg_count_key, type, 16, 2);
DG_ABI_FIELD(dg_count_key, access, 18, 2);
DG_ABI_FIELD(dg_count_key, pad, 20, 4);

DG_ABI_SIZE(dg_count_val, 32);
DG_ABI_FIELD(dg_count_val, granted, 0, 8);
DG_ABI_FIELD(dg_count_val, passed, 8, 8);
DG_ABI_FIELD(dg_count_val, allowed, 16, 8);
DG_ABI_FIELD(dg_count_val, denied, 24, 8);

DG_ABI_SIZE(dg_event, 32);
DG_ABI_FIELD(dg_event, cgroup_id, 0, 8);
DG_ABI_FIELD(dg_event, ts_ns, 8, 8);
DG_ABI_FIELD(dg_event, type, 16, 4);
DG_ABI_FIELD(dg_event, major, 20, 4);
DG_ABI_FIELD(dg_event, minor, 24, 4);
DG_ABI_FIELD(dg_event, access, 28, 4);

DG_ABI_SIZE(dg_self, 16);
DG_ABI_FIELD(dg_self, cgroup_id, 0, 8);
DG_ABI_FIELD(dg_self, orig_id, 8, 4);
DG_ABI_FIELD(dg_self, pad, 12, 4);

DG_ABI_SIZE(dg_tmark, 48);
DG_ABI_FIELD(dg_tmark, major, 0, 4);
DG_ABI_FIELD(dg_tmark, minor, 4, 4);
DG_ABI_FIELD(dg_tmark, access_type, 8, 4);
DG_ABI_FIELD(dg_tmark, denied, 12, 4);
DG_ABI_FIELD(dg_tmark, used, 16, 32);

DG_ABI_SIZE(dg_cgstate, 24);
DG_ABI_FIELD(dg_cgstate, cgroup_id, 0, 8);
DG_ABI_FIELD(dg_cgstate, slot, 8, 8);
DG_ABI_FIELD(dg_cgstate, orig, 16, 8);

DG_ABI_SIZE(dg_attach_event, 32);
DG_ABI_FIELD(dg_attach_event, cgroup_id, 0, 8);
DG_ABI_FIELD(dg_attach_event, ts_ns, 8, 8);
DG_ABI_FIELD(dg_attach_event, what, 16, 4);
DG_ABI_FIELD(dg_attach_event, pid, 20, 4);
DG_ABI_FIELD(dg_attach_event, prog_id, 24, 4);
DG_ABI_FIELD(dg_attach_event, replace_id, 28, 4);

DG_ABI_SIZE(dg_dev_key, 8);
DG_ABI_FIELD(dg_dev_key, major, 0, 4);
DG_ABI_FIELD(dg_dev_key, minor, 4, 4);

DG_ABI_SIZE(dg_ratelimit_key, 16);
DG_ABI_FIELD(dg_ratelimit_key, cgroup_id, 0, 8);
DG_ABI_FIELD(dg_ratelimit_key, major, 8, 4);
DG_ABI_FIELD(dg_ratelimit_key, minor, 12, 4);

#endif
