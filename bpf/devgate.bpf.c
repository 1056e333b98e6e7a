// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * devgate's cgroup device programs.
 *
 * gate:  takes the place of one runtime device program on a container's
 *        cgroup. A hit in the grants map allows; anything else is handed to
 *        the runtime's original program with a tail call, so the runtime's
 *        policy is kept exactly. Without a runtime program it applies the
 *        default: GPU-class majors denied unless granted, all else allowed.
 *        Other devices are looked up only while dg_devgrants_v1 says that
 *        some grant --device exists on the host.
 * beside: the gate's other form (gate-mode = beside): attached after
 *        the runtime's programs, which stay in place, so the runtime can
 *        still replace them. A grant clears the verdict they reached
 *        (bpf_set_retval) and allows; anything else keeps their verdict.
 *        It runs before the ancestors' programs, which keep theirs.
 * mark:  the beside gate's lookout, attached with BPF_F_PREORDER (6.15+):
 *        it runs after the ancestors' pre-order programs and before the
 *        cgroup's own, and notes whether those ancestors already denied,
 *        so that the beside gate never clears an ancestor's denial.
 * tally: attached after the gates; never denies. It reads the verdict the
 *        programs before it reached (bpf_get_retval) and counts GPU-class
 *        accesses allowed and denied, emitting rate-limited denial events.
 *
 * One container must not exhaust what all share: its devices that are no
 * node of the inventory (dg_known_v1) are counted under one "other" key,
 * and its denial events are limited per device and per cgroup.
 *
 * Shared (the rule): gate and tally are loaded and verified once, at start,
 * and attached to every guarded cgroup. What differs per container lives
 * in the cgroup's dg_cgstate_v1 storage (one value per cgroup, shared by
 * every program of ours attached there): its cgroup id, and for each set of
 * gates the index of the runtime program it stands in for in that set's
 * prog array (dg_slots<SET>_v1). A first grant is a storage write, a slot
 * update and one BPF_F_REPLACE attach; the verifier never runs after start.
 * A set exists per expected_attach_type, because a prog array takes only
 * programs of its owner's (see onegate.c).
 *
 * Copies (the exception: a second runtime program on one cgroup, a cgroup
 * without BPF_F_ALLOW_MULTI): a program loaded for that one cgroup, its
 * cgroup id in its own "self" map and its runtime program in slot 0.
 *
 * Either way the GPU-class devices are in dg_guarded_v1, filled by devgated
 * from its inventory: an open() of any other device costs one array lookup
 * before the runtime's program.
 *
 * The pinned maps are declared as DG_V(dg_grants) and so on: the names end
 * in the layout's version (dg_grants_v1; see DG_MAPS_VERSION in devgate.h).
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "devgate.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

const volatile __u32 shared = 0;      /* state in dg_cgstate_v1, not in "self" */
const volatile __u32 gate_set = 0;    /* shared: which slot of dg_cgstate is this gate's */
const volatile __u32 has_runtime = 0; /* copies: slot 0 holds a runtime program */
/* Denial events per cgroup and window; 0: no limit (a test of the ring's drops). */
const volatile __u32 cgroup_events = DG_CGROUP_EVENTS;
/*
 * Kernels with BPF_F_PREORDER: the beside gate clears only what devgate_mark
 * saw allowed, read back by thread from per-CPU slots or the task's record
 * (DG_MARK_*).
 */
const volatile __u32 need_mark = DG_MARK_NONE;
/*
 * The comm devgated's prober takes (grant/prober.c), random per devgated
 * run: its opens get the same verdict as anyone's but are neither counted
 * nor reported. Zero: no prober.
 */
const volatile __u64 proof_comm[2] = {};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct dg_self);
} self SEC(".maps");

/*
 * The runtime programs gates stand in for. A copy's own array, slot 0; for
 * shared gates, user space puts its set's pinned dg_slots<SET>_v1 here.
 */
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} runtime_prog SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_CGROUP_STORAGE);
	__type(key, __u64); /* the cgroup id: one value per cgroup, for all our programs */
	__type(value, struct dg_cgstate);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} DG_V(dg_cgstate) SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, DG_MAX_GRANTS);
	__type(key, struct dg_grant_key);
	__type(value, struct dg_grant_val);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} DG_V(dg_grants) SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, DG_MAX_COUNTERS);
	__type(key, struct dg_count_key);
	__type(value, struct dg_count_val);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} DG_V(dg_counters) SEC(".maps");

/* The nodes of devgated's inventory, which the counters map keys one by one. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, DG_MAX_KNOWN);
	__type(key, struct dg_dev_key);
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} DG_V(dg_known) SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, DG_EVENTS_BYTES);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} DG_V(dg_events) SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct dg_ratelimit_key);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} DG_V(dg_ratelim) SEC(".maps");

/*
 * Non-zero while any grant of a non-GPU device (grant --device) exists on
 * the host. Only then does the gate look such a device up in the grants
 * map: a host without device grants pays one array lookup, no hash.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} DG_V(dg_devgrants) SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, DG_GUARD_MAJORS);
	__type(key, __u32);
	__type(value, struct dg_guard);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} DG_V(dg_guarded) SEC(".maps");

/*
 * Denial events the ring buffer had no room for: user space lagged behind.
 * Named dg_evdrops_v1; releases before it was renamed pinned it as
 * dg_event_drops_v1, a name longer than the kernel keeps (adopt.c).
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} DG_V(dg_evdrops) SEC(".maps");

/*
 * What devgate_mark saw for the access in progress, per CPU and by thread
 * (the programs of one access run on one CPU). A thread that ran on this
 * CPU between mark and beside leaves a stranger's entry: the gate then
 * keeps the denial (fail closed).
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, DG_MARK_SLOTS);
	__type(key, __u32);
	__type(value, struct dg_mark);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} DG_V(dg_mark) SEC(".maps");

/*
 * What devgate_mark saw, the thread's own (DG_MARK_TASK): no other thread
 * writes it, whoever ran on this CPU between the lookout and the gate.
 */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct dg_tmark);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} DG_V(dg_tmark) SEC(".maps");

/* The container this program serves; 0 (matching no grant) until it is set. */
static __always_inline __u64 my_cgroup(void)
{
	__u32 zero = 0;
	struct dg_self *s;

	if (shared) {
		struct dg_cgstate *st = bpf_get_local_storage(&DG_V(dg_cgstate), 0);

		return st->cgroup_id;
	}
	s = bpf_map_lookup_elem(&self, &zero);
	return s ? s->cgroup_id : 0;
}

/* Where in runtime_prog this gate's runtime program is; -1: none (default policy). */
static __always_inline int runtime_slot(void)
{
	if (shared) {
		struct dg_cgstate *st = bpf_get_local_storage(&DG_V(dg_cgstate), 0);
		__u32 slot = st->slot[gate_set & (DG_GATE_SETS - 1)];

		return slot ? (int)slot : -1;
	}
	return has_runtime ? 0 : -1;
}

static __always_inline int is_prober(void)
{
	__u64 comm[2] = {};

	if (!proof_comm[0] || bpf_get_current_comm(comm, sizeof(comm)) < 0)
		return 0;
	return comm[0] == proof_comm[0] && comm[1] == proof_comm[1];
}

static __always_inline struct dg_count_val *counter(struct bpf_cgroup_dev_ctx *ctx, __u64 cgid)
{
	struct dg_count_key key = {
		.cgroup_id = cgid,
		.major = ctx->major,
		.minor = ctx->minor,
		.type = ctx->access_type & 0xffff,
		.access = ctx->access_type >> 16,
	};
	struct dg_dev_key dev = { .major = ctx->major, .minor = ctx->minor };
	struct dg_count_val *val;

	if (is_prober())
		return NULL;
	val = bpf_map_lookup_elem(&DG_V(dg_counters), &key);
	if (val)
		return val;
	/* A minor the inventory does not know: the cgroup's one "other" key. */
	if (!bpf_map_lookup_elem(&DG_V(dg_known), &dev)) {
		key.major = key.minor = DG_DEV_OTHER;
		val = bpf_map_lookup_elem(&DG_V(dg_counters), &key);
		if (val)
			return val;
	}
	{
		struct dg_count_val zero = {};

		/* A full map drops the count; user space reports the fill level. */
		bpf_map_update_elem(&DG_V(dg_counters), &key, &zero, BPF_NOEXIST);
	}
	return bpf_map_lookup_elem(&DG_V(dg_counters), &key);
}

/*
 * A granted non-GPU device (grant --device): a character device, or a block
 * device the admin allowed; the key's type keeps the two apart. Never counted.
 */
static __always_inline int any_device_grant(void)
{
	__u32 zero = 0;
	__u32 *any = bpf_map_lookup_elem(&DG_V(dg_devgrants), &zero);

	return any && *any;
}

static __always_inline int device_granted(struct bpf_cgroup_dev_ctx *ctx, __u32 access)
{
	struct dg_grant_key key = {
		.type = ctx->access_type & 0xffff,
		.major = ctx->major,
		.minor = ctx->minor,
	};
	struct dg_grant_val *grant;

	if (!any_device_grant())
		return 0;
	key.cgroup_id = my_cgroup();
	grant = bpf_map_lookup_elem(&DG_V(dg_grants), &key);
	return grant && (access & ~grant->access) == 0;
}

static __always_inline int is_gpu(struct bpf_cgroup_dev_ctx *ctx)
{
	__u32 major = ctx->major, minor = ctx->minor;
	struct dg_guard *g;

	if ((ctx->access_type & 0xffff) != DG_DEV_CHAR)
		return 0;
	g = bpf_map_lookup_elem(&DG_V(dg_guarded), &major);
	if (!g)
		return 0;
	if (g->all)
		return 1;
	if (minor >= DG_GUARD_MINORS)
		return 0;
	return (g->minors[minor >> 6] >> (minor & 63)) & 1;
}

/* Whether cgroup cgid holds a grant of this GPU node that covers the access. */
static __always_inline int gpu_granted(struct bpf_cgroup_dev_ctx *ctx, __u64 cgid)
{
	struct dg_grant_key key = {
		.cgroup_id = cgid,
		.type = DG_DEV_CHAR,
		.major = ctx->major,
		.minor = ctx->minor,
	};
	struct dg_grant_val *grant = bpf_map_lookup_elem(&DG_V(dg_grants), &key);

	return grant && ((ctx->access_type >> 16) & ~grant->access) == 0;
}

SEC("cgroup/dev")
int devgate_gate(struct bpf_cgroup_dev_ctx *ctx)
{
	struct dg_count_val *cnt;
	__u64 cgid;
	int slot;

	/* Not a GPU: a device grant, if the host has any; else the runtime decides. */
	if (!is_gpu(ctx)) {
		if (device_granted(ctx, ctx->access_type >> 16))
			return 1;
		slot = runtime_slot();
		if (slot < 0)
			return 1;
		bpf_tail_call(ctx, &runtime_prog, slot);
		return 0;
	}
	cgid = my_cgroup();
	if (gpu_granted(ctx, cgid)) {
		cnt = counter(ctx, cgid);
		if (cnt)
			__sync_fetch_and_add(&cnt->granted, 1);
		return 1;
	}
	slot = runtime_slot();
	if (slot >= 0) {
		cnt = counter(ctx, cgid);
		if (cnt)
			__sync_fetch_and_add(&cnt->passed, 1);
		bpf_tail_call(ctx, &runtime_prog, slot);
		/* Slot empty: fail closed rather than widen the runtime's policy. */
		return 0;
	}
	return 0; /* the default policy: GPU-class devices only when granted */
}

/* Notes whether the ancestors' pre-order programs denied this access. */
SEC("cgroup/dev")
int devgate_mark(struct bpf_cgroup_dev_ctx *ctx)
{
	struct dg_tmark *t;
	struct dg_mark *m;
	__u64 me;
	__u32 k;

	if (need_mark == DG_MARK_TASK) {
		/* No gate asks about an access that no grant can allow: most opens. */
		if (!is_gpu(ctx) && !any_device_grant())
			return 1;
		t = bpf_task_storage_get(&DG_V(dg_tmark), bpf_get_current_task_btf(), 0,
					 BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (t) {
			t->major = ctx->major;
			t->minor = ctx->minor;
			t->access_type = ctx->access_type;
			t->denied = bpf_get_retval() != 0;
			for (int i = 0; i < DG_TMARK_USED; i++)
				t->used[i] = 0;
		}
		return 1;
	}
	me = bpf_get_current_pid_tgid();
	k = (__u32)me & (DG_MARK_SLOTS - 1);
	m = bpf_map_lookup_elem(&DG_V(dg_mark), &k);
	if (m) {
		m->pid_tgid = me;
		m->denied = bpf_get_retval() != 0;
	}
	return 1;
}

/*
 * Whether the thread's record is this access's, not denied by an ancestor,
 * and not yet taken by cgid's gate; takes it. A second gate of one cgroup
 * in one access (the other instance, a moment during a move) finds it
 * taken and clears nothing: the first already did.
 */
static __always_inline int take_task_mark(struct bpf_cgroup_dev_ctx *ctx, __u64 cgid)
{
	struct dg_tmark *t =
		bpf_task_storage_get(&DG_V(dg_tmark), bpf_get_current_task_btf(), 0, 0);

	if (!t || !cgid || t->denied || t->major != ctx->major || t->minor != ctx->minor ||
	    t->access_type != ctx->access_type)
		return 0;
	for (int i = 0; i < DG_TMARK_USED; i++) {
		if (t->used[i] == cgid)
			return 0;
		if (!t->used[i]) {
			t->used[i] = cgid;
			return 1;
		}
	}
	return 0; /* more nested guarded cgroups than the record holds: fail closed */
}

/*
 * Clears a denial unless an ancestor's pre-order program made it (or it
 * cannot tell); 0 when the denial stands.
 */
static __always_inline int clear_denial(struct bpf_cgroup_dev_ctx *ctx, __u64 cgid)
{
	__u64 me;
	__u32 k;
	struct dg_mark *m;

	if (need_mark == DG_MARK_TASK) {
		if (!take_task_mark(ctx, cgid))
			return 0;
	} else if (need_mark) {
		me = bpf_get_current_pid_tgid();
		k = (__u32)me & (DG_MARK_SLOTS - 1);
		m = bpf_map_lookup_elem(&DG_V(dg_mark), &k);
		if (!m || m->pid_tgid != me || m->denied)
			return 0;
	}
	bpf_set_retval(0);
	return 1;
}

/* Clears the denial of the programs before it on a grant; keeps their verdict otherwise. */
SEC("cgroup/dev")
int devgate_beside(struct bpf_cgroup_dev_ctx *ctx)
{
	struct dg_count_val *cnt;
	__u64 cgid;

	if (!is_gpu(ctx)) {
		if (device_granted(ctx, ctx->access_type >> 16))
			clear_denial(ctx, my_cgroup());
		return 1;
	}
	cgid = my_cgroup();
	cnt = counter(ctx, cgid);
	if (gpu_granted(ctx, cgid)) {
		/* Counted where the grant decided; a denial the lookout kept is the tally's. */
		if (clear_denial(ctx, cgid) && cnt)
			__sync_fetch_and_add(&cnt->granted, 1);
		return 1;
	}
	if (cnt)
		__sync_fetch_and_add(&cnt->passed, 1);
	return 1;
}

/*
 * Takes one event from cgid's budget for the window now is in; 0 when it is
 * spent. Racing CPUs may let a few more through: a bound, not a count.
 */
static __always_inline int budget_take(__u64 cgid, __u64 now)
{
	struct dg_ratelimit_key bk = { .cgroup_id = cgid, .major = DG_DEV_OTHER };
	__u64 win = now >> DG_EVENT_WINDOW_SHIFT, fresh = win << 32 | 1;
	__u64 *b;

	if (!cgroup_events)
		return 1;
	b = bpf_map_lookup_elem(&DG_V(dg_ratelim), &bk);
	if (b && *b >> 32 == win) {
		if ((*b & 0xffffffff) >= cgroup_events)
			return 0;
		__sync_fetch_and_add(b, 1);
		return 1;
	}
	bpf_map_update_elem(&DG_V(dg_ratelim), &bk, &fresh, BPF_ANY);
	return 1;
}

static __always_inline void emit_denial(struct bpf_cgroup_dev_ctx *ctx, __u64 cgid)
{
	struct dg_ratelimit_key rk = {
		.cgroup_id = cgid,
		.major = ctx->major,
		.minor = ctx->minor,
	};
	__u64 now = bpf_ktime_get_ns();
	__u64 *last = bpf_map_lookup_elem(&DG_V(dg_ratelim), &rk);
	struct dg_event ev = {};

	/* One a second per device, then a budget per cgroup before anything is stored. */
	if (last && now - *last < DG_EVENT_INTERVAL_NS)
		return;
	if (!budget_take(cgid, now))
		return;
	bpf_map_update_elem(&DG_V(dg_ratelim), &rk, &now, BPF_ANY);
	ev.cgroup_id = cgid;
	ev.ts_ns = now;
	ev.type = ctx->access_type & 0xffff;
	ev.major = ctx->major;
	ev.minor = ctx->minor;
	ev.access = ctx->access_type >> 16;
	if (bpf_ringbuf_output(&DG_V(dg_events), &ev, sizeof(ev), 0) < 0) {
		__u32 zero = 0;
		__u64 *drops = bpf_map_lookup_elem(&DG_V(dg_evdrops), &zero);

		if (drops)
			__sync_fetch_and_add(drops, 1);
	}
}

SEC("cgroup/dev")
int devgate_tally(struct bpf_cgroup_dev_ctx *ctx)
{
	struct dg_count_val *cnt;
	__u64 cgid;

	if (!is_gpu(ctx) || is_prober())
		return 1;
	cgid = my_cgroup();
	if (!cgid)
		return 1; /* attached a moment before devgated names the cgroup */
	cnt = counter(ctx, cgid);
	if (bpf_get_retval()) {
		if (cnt)
			__sync_fetch_and_add(&cnt->denied, 1);
		emit_denial(ctx, cgid);
	} else if (cnt) {
		__sync_fetch_and_add(&cnt->allowed, 1);
	}
	return 1;
}
