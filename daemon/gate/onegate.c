// SPDX-License-Identifier: Apache-2.0
/*
 * One gate for every cgroup: the shared programs (a gate per set, one
 * tally), loaded and verified once and pinned, so a restarted devgated
 * reuses them; the slots of the sets' prog arrays; and each cgroup's
 * dg_cgstate_v1 storage, which says which slot its gates use. The kernel
 * is the record: the storage and the arrays are read back at start.
 *
 * It attaches nothing to a container's cgroup (guard.c does) and knows
 * nothing of the per-cgroup copies and their pins.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/utsname.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "array.h"
#include "cgprog.h"
#include "cleanup.h"
#include "log.h"
#include "onegate.h"
#include "util.h"

/* The expected_attach_type of each set's gate and of the programs it takes. */
static const enum bpf_attach_type set_eat[DG_GATE_SETS] = { 0, BPF_CGROUP_DEVICE };

static int dup_cloexec(int fd)
{
	return fcntl(fd, F_DUPFD_CLOEXEC, 3);
}

static int pin_at(const struct bpfgate *bg, char *buf, size_t len, const char *name)
{
	int n = snprintf(buf, len, "%s/%s", bg->pin_root, name);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* The name of set's prog array, its pin's and the kernel's: dg_slots<SET>_v1. */
static void slots_name(char *buf, size_t len, uint32_t set)
{
	snprintf(buf, len, "dg_slots%u" DG_VSUFFIX, set);
}

/*
 * Opens set's prog array: from its pin, else adopt_fd (the array of a gate
 * found on a leased cgroup) pinned again, else a new one, pinned. *fresh
 * says it is new. Returns the fd or -errno.
 */
static int slots_open(struct bpfgate *bg, uint32_t set, int adopt_fd, bool *fresh)
{
	char name[32], path[PATH_MAX];
	int fd, r;

	slots_name(name, sizeof(name), set);
	r = pin_at(bg, path, sizeof(path), name);
	if (r < 0)
		return r;
	fd = bpf_obj_get(path);
	*fresh = fd < 0 && adopt_fd < 0;
	if (fd >= 0)
		return fd;
	if (adopt_fd >= 0) {
		fd = dup_cloexec(adopt_fd);
		if (fd >= 0 && bpf_obj_pin(fd, path) < 0)
			log_warning_errno(errno, "cannot pin %s again: %m", path);
		return fd < 0 ? -errno : fd;
	}
	fd = bpf_map_create(BPF_MAP_TYPE_PROG_ARRAY, name, sizeof(uint32_t), sizeof(uint32_t),
			    DG_MAX_SLOTS, NULL);
	if (fd < 0)
		return -errno;
	if (bpf_obj_pin(fd, path) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	return fd;
}

static uint32_t id_of(int fd, bool prog)
{
	struct bpf_prog_info pi = { 0 };
	struct bpf_map_info mi = { 0 };
	uint32_t len = prog ? sizeof(pi) : sizeof(mi);

	if (bpf_obj_get_info_by_fd(fd, prog ? (void *)&pi : (void *)&mi, &len) < 0)
		return 0;
	return prog ? pi.id : mi.id;
}

/*
 * Whether the program fd is ours: it uses our counters map and, for a gate
 * (slots_id not 0), the set's prog array.
 */
static bool prog_uses(int fd, uint32_t counters_id, uint32_t slots_id)
{
	uint32_t map_ids[16] = { 0 };
	struct bpf_prog_info info = { 0 };
	uint32_t len = sizeof(info);
	bool counters = false, slots = !slots_id;

	info.nr_map_ids = ARRAY_SIZE(map_ids);
	info.map_ids = (uint64_t)(uintptr_t)map_ids;
	if (bpf_obj_get_info_by_fd(fd, &info, &len) < 0)
		return false;
	for (uint32_t i = 0; i < info.nr_map_ids && i < ARRAY_SIZE(map_ids); i++) {
		counters |= map_ids[i] == counters_id;
		slots |= map_ids[i] == slots_id;
	}
	return counters && slots;
}

/*
 * The pin name of a shared program: dg_tally_map_v1, dg_gate<SET>_map_v1.
 * "map": the GPU-class devices are in dg_guarded_v1, no longer majors in the
 * programs' read-only data (the pins of those were named by their majors).
 */
static void prog_pin_name(char *buf, size_t len, bool tally, uint32_t set)
{
	if (tally)
		snprintf(buf, len, "dg_tally_map" DG_VSUFFIX);
	else
		snprintf(buf, len, "dg_gate%u_map" DG_VSUFFIX, set);
}

/*
 * The pinned shared tally, or set's pinned gate, if it is ours; a pin of a
 * program that uses other maps is removed. Returns its fd or -errno.
 */
static int adopt_pinned(struct bpfgate *bg, bool tally, uint32_t set)
{
	char name[64], path[PATH_MAX];
	int fd;

	prog_pin_name(name, sizeof(name), tally, set);
	if (pin_at(bg, path, sizeof(path), name) < 0)
		return -ENAMETOOLONG;
	fd = bpf_obj_get(path);
	if (fd < 0)
		return -errno;
	if (!prog_uses(fd, bg->counters_id, tally ? 0 : bg->slots_id[set])) {
		close(fd);
		(void)unlink(path); /* a program of maps no longer ours */
		return -ESTALE;
	}
	return fd;
}

/* Pins a shared program under its name, in place of a stale pin. */
static int pin_prog(const struct bpfgate *bg, int fd, bool tally, uint32_t set)
{
	char name[64], path[PATH_MAX];

	prog_pin_name(name, sizeof(name), tally, set);
	if (pin_at(bg, path, sizeof(path), name) < 0)
		return -ENAMETOOLONG;
	(void)unlink(path);
	return bpf_obj_pin(fd, path) < 0 ? -errno : 0;
}

/*
 * Loads set's gate and/or the tally, verified once for every cgroup, and
 * pins them. A pin that fails is only a warning: a restart loads again.
 */
static int load_set(struct bpfgate *bg, uint32_t set, bool gate, bool tally)
{
	auto_cleanup(devgate_destroyp) struct devgate *skel = NULL;
	int r = gateobj_load_shared(bg->pin_root, bg->maps, bg->slots_fd[set], set, set_eat[set],
				    gate, tally, &skel);
	int fd;

	if (r < 0)
		return r;
	if (gate) {
		fd = dup_cloexec(bpf_program__fd(skel->progs.devgate_gate));
		if (fd < 0)
			return -errno;
		bg->gate_fd[set] = fd;
		r = pin_prog(bg, fd, false, set);
	}
	if (tally) {
		fd = dup_cloexec(bpf_program__fd(skel->progs.devgate_tally));
		if (fd < 0)
			return -errno;
		bg->tally_fd = fd;
		r = r < 0 ? r : pin_prog(bg, fd, true, 0);
	}
	if (r < 0)
		log_warning_errno(r, "cannot pin devgate's shared programs: %m "
				     "(a restart loads them again)");
	return 0;
}

/* Marks the slots in use from every cgroup's storage; the rest are free. */
static void scan_slots(struct bpfgate *bg)
{
	uint64_t key, *prev = NULL;
	struct dg_cgstate st;

	while (bpf_map_get_next_key(bg->map_fd[MAP_CGSTATE], prev, &key) == 0) {
		prev = &key;
		if (bpf_map_lookup_elem(bg->map_fd[MAP_CGSTATE], &key, &st) < 0)
			continue;
		for (uint32_t e = 0; e < DG_GATE_SETS; e++) {
			if (st.slot[e] && st.slot[e] < DG_MAX_SLOTS) {
				bg->slot_cg[e][st.slot[e]] = key;
				if (st.slot[e] >= bg->slot_top[e])
					bg->slot_top[e] = st.slot[e] + 1;
			}
		}
	}
}

/* Clears set's array entries that no storage names (a crash between the two writes). */
static void clear_strays(struct bpfgate *bg, uint32_t set)
{
	unsigned int n = 0;

	for (uint32_t s = 1; s < DG_MAX_SLOTS; s++) {
		uint32_t id;

		if (bg->slot_cg[set][s] || bpf_map_lookup_elem(bg->slots_fd[set], &s, &id) < 0)
			continue;
		if (bpf_map_delete_elem(bg->slots_fd[set], &s) == 0)
			n++;
	}
	if (n)
		log_notice("cleared %u slot(s) of set %u that no cgroup uses", n, set);
}

int onegate_array_set(const char *name)
{
	char want[32];

	for (uint32_t e = 0; e < DG_GATE_SETS; e++) {
		slots_name(want, sizeof(want), e);
		if (strcmp(name, want) == 0)
			return (int)e;
	}
	return -1;
}

/* The set of a gate's prog array (dg_slots<SET>_v1), or -1: a copy's own. */
static int slots_set(int map_fd)
{
	struct bpf_map_info mi = { 0 };
	uint32_t len = sizeof(mi);

	if (bpf_obj_get_info_by_fd(map_fd, &mi, &len) < 0 || mi.type != BPF_MAP_TYPE_PROG_ARRAY)
		return -1;
	return onegate_array_set(mi.name);
}

/*
 * If program id is a shared gate of ours (it counts in our counters map),
 * takes it into gates[set] and its prog array into slots[set], where those
 * are still -1.
 */
static void adopt_gate(const struct bpfgate *bg, uint32_t id, int *gates, int *slots)
{
	uint32_t map_ids[16] = { 0 };
	struct bpf_prog_info info = { 0 };
	uint32_t len = sizeof(info);
	auto_close int fd = bpf_prog_get_fd_by_id(id);
	int set = -1, slots_fd = -1;
	bool ours = false;

	info.nr_map_ids = ARRAY_SIZE(map_ids);
	info.map_ids = (uint64_t)(uintptr_t)map_ids;
	if (fd < 0 || bpf_obj_get_info_by_fd(fd, &info, &len) < 0 ||
	    strcmp(info.name, "devgate_gate") != 0)
		return;
	for (uint32_t i = 0; i < info.nr_map_ids && i < ARRAY_SIZE(map_ids); i++) {
		int mfd = bpf_map_get_fd_by_id(map_ids[i]);
		int s = mfd < 0 ? -1 : slots_set(mfd);

		ours |= map_ids[i] == bg->counters_id;
		if (s >= 0 && slots_fd < 0) {
			set = s;
			slots_fd = TAKE_FD(mfd);
		}
		safe_close(mfd);
	}
	if (ours && set >= 0 && gates[set] < 0) {
		gates[set] = TAKE_FD(fd);
		slots[set] = TAKE_FD(slots_fd);
	}
	safe_close(slots_fd);
}

/* The pins of the beside gate's two instances and of its lookout (by enum beside_part). */
static const char *const beside_pins[BESIDE_PARTS] = { "dg_beside" DG_VSUFFIX,
						       "dg_beside2" DG_VSUFFIX,
						       "dg_lookout" DG_VSUFFIX };

/* Whether fd is part part of ours: its name, and the maps it must use (counters, the mark's). */
static bool beside_part_is(const struct bpfgate *bg, int fd, int part)
{
	struct bpf_prog_info info = { 0 };
	uint32_t len = sizeof(info);
	const char *name = part == BESIDE_MARK ? "devgate_mark" : "devgate_beside";

	if (fd < 0 || bpf_obj_get_info_by_fd(fd, &info, &len) < 0 || strcmp(info.name, name) != 0)
		return false;
	/* One that hands on what the lookout saw another way is an earlier release's. */
	if (gateobj_need_mark_of(fd) != (int)bg->mark_mode)
		return false;
	if (part == BESIDE_MARK)
		return prog_uses(fd, id_of(bg->map_fd[MAP_MARK], false), 0);
	/* One from before the lookout does not read it: it would clear an ancestor's denial. */
	return prog_uses(fd, bg->counters_id, id_of(bg->map_fd[MAP_MARK], false));
}

/* If program id is a part of the beside gate of ours, takes it into live[] where there is room. */
static void adopt_beside(const struct bpfgate *bg, uint32_t id, int *live)
{
	auto_close int fd = bpf_prog_get_fd_by_id(id);

	if (beside_part_is(bg, fd, BESIDE_MARK) && live[BESIDE_MARK] < 0)
		live[BESIDE_MARK] = TAKE_FD(fd);
	for (int k = BESIDE_A; k <= BESIDE_B && fd >= 0; k++) {
		if (live[k] < 0 && beside_part_is(bg, fd, k))
			live[k] = TAKE_FD(fd);
	}
}

/*
 * Takes the shared gates of ours attached to the leased cgroups cgfds,
 * with their prog arrays, into gates and slots (by set). With the pins
 * gone they are found only there; adopting them keeps the one set of
 * arrays that the cgroups' storage points into, never a second one.
 */
static void find_live_gates(const struct bpfgate *bg, const int *cgfds, size_t n, int *gates,
			    int *slots, int *beside)
{
	for (size_t i = 0; i < n; i++) {
		struct attached now = { 0 };

		if (cgfds[i] < 0 || cgprog_query(cgfds[i], false, &now) < 0)
			continue;
		for (uint32_t k = 0; k < now.n; k++) {
			adopt_gate(bg, now.ids[k], gates, slots);
			adopt_beside(bg, now.ids[k], beside);
		}
	}
}

/* Whether the kernel runs pre-order programs (6.15): an ancestor's may then run first. */
static bool kernel_preorder(void)
{
	struct utsname u;
	unsigned int major = 0, minor = 0;

	if (uname(&u) < 0 || sscanf(u.release, "%u.%u", &major, &minor) != 2)
		return true; /* unknown: keep the lookout */
	return major > 6 || (major == 6 && minor >= 15);
}

/*
 * How the lookout hands on what it saw: in the task's own storage where a
 * cgroup/dev program may use it (a lookout of that kind loads), else in
 * per-CPU slots by thread. DEVGATE_TEST_MARK=slots: the slots (tests of the
 * conversion, and of kernels without it).
 */
static uint32_t mark_mode(const struct bpfgate *bg)
{
	auto_cleanup(devgate_destroyp) struct devgate *skel = NULL;
	const char *v = getenv("DEVGATE_TEST_MARK");

	if (v && strcmp(v, "slots") == 0)
		return DG_MARK_SLOTS_CPU;
	if (gateobj_load_beside(bg->pin_root, bg->maps, true, DG_MARK_TASK, &skel) < 0) {
		log_notice("no task storage for device programs: the lookout keeps per-CPU slots");
		return DG_MARK_SLOTS_CPU;
	}
	return DG_MARK_TASK;
}

/* Loads one part of the beside gate; returns its fd or -errno. */
static int beside_load(struct bpfgate *bg, int part)
{
	auto_cleanup(devgate_destroyp) struct devgate *skel = NULL;
	int r = gateobj_load_beside(bg->pin_root, bg->maps, part == BESIDE_MARK, bg->mark_mode,
				    &skel);

	if (r < 0)
		return r;
	r = dup_cloexec(bpf_program__fd(part == BESIDE_MARK ? skel->progs.devgate_mark
							    : skel->progs.devgate_beside));
	return r < 0 ? -errno : r;
}

/*
 * The beside gate's parts: pinned, else found on a leased cgroup, else
 * loaded. They are there whether or not new guards use them, so that
 * cgroups guarded by them are known as such. A kernel without
 * bpf_set_retval cannot load them; one without BPF_F_PREORDER needs no
 * lookout.
 */
static void beside_open(struct bpfgate *bg, int *live)
{
	for (int k = 0; k < BESIDE_PARTS; k++) {
		char path[PATH_MAX];
		int fd;

		if (k == BESIDE_MARK && !bg->need_mark)
			continue;
		if (pin_at(bg, path, sizeof(path), beside_pins[k]) < 0)
			return;
		fd = bpf_obj_get(path);
		if (fd >= 0 && !beside_part_is(bg, fd, k)) {
			fd = safe_close(fd);
			(void)unlink(path); /* a program of maps no longer ours */
		}
		if (fd < 0 && live[k] >= 0)
			fd = TAKE_FD(live[k]);
		if (fd < 0)
			fd = beside_load(bg, k);
		if (fd < 0) {
			log_debug("cannot load the beside gate: %s", strerror(-fd));
			return;
		}
		if (k == BESIDE_MARK) {
			bg->mark_fd = fd;
			bg->mark_id = id_of(fd, true);
		} else {
			bg->beside_fd[k] = fd;
			bg->beside_id[k] = id_of(fd, true);
		}
		if (access(path, F_OK) < 0 && bpf_obj_pin(fd, path) < 0)
			log_warning_errno(errno, "cannot pin %s: %m (a restart loads it again)",
					  path);
	}
}

int onegate_open(struct bpfgate *bg, const int *leased_cgfds, size_t n_leased)
{
	int live_gate[DG_GATE_SETS] = { -1, -1 }, live_slots[DG_GATE_SETS] = { -1, -1 };
	int live_beside[BESIDE_PARTS] = { -1, -1, -1 };
	bool fresh[DG_GATE_SETS];
	int r;

	bg->map_fd[MAP_CGSTATE] = bpf_map__fd(bg->maps->maps.dg_cgstate_v1);
	/* Before the live gates are looked at: their kind of lookout must be ours. */
	bg->need_mark = kernel_preorder();
	bg->mark_mode = bg->need_mark ? mark_mode(bg) : DG_MARK_NONE;
	find_live_gates(bg, leased_cgfds, n_leased, live_gate, live_slots, live_beside);
	for (uint32_t e = 0; e < DG_GATE_SETS; e++) {
		bg->gate_fd[e] = -1;
		bg->slot_cg[e] = calloc(DG_MAX_SLOTS, sizeof(uint64_t));
		if (!bg->slot_cg[e])
			return -ENOMEM;
		bg->slot_top[e] = 1;
		bg->slots_fd[e] = slots_open(bg, e, live_slots[e], &fresh[e]);
		safe_close(live_slots[e]);
		if (bg->slots_fd[e] < 0)
			return bg->slots_fd[e];
		bg->slots_id[e] = id_of(bg->slots_fd[e], false);
	}
	bg->tally_fd = -1;
	for (uint32_t e = 0; e < DG_GATE_SETS; e++) {
		bg->gate_fd[e] = adopt_pinned(bg, false, e);
		if (bg->gate_fd[e] < 0 && live_gate[e] >= 0 &&
		    prog_uses(live_gate[e], bg->counters_id, bg->slots_id[e])) {
			bg->gate_fd[e] = TAKE_FD(live_gate[e]);
			if (pin_prog(bg, bg->gate_fd[e], false, e) == 0)
				log_notice(
					"adopted shared gate %u of the leased cgroups and pinned it again",
					id_of(bg->gate_fd[e], true));
		}
		safe_close(live_gate[e]);
		if (e == 0)
			bg->tally_fd = adopt_pinned(bg, true, 0);
		if (bg->gate_fd[e] >= 0 && (e != 0 || bg->tally_fd >= 0))
			continue;
		r = load_set(bg, e, bg->gate_fd[e] < 0, e == 0 && bg->tally_fd < 0);
		if (r < 0)
			return r;
	}
	for (uint32_t e = 0; e < DG_GATE_SETS; e++)
		bg->gate_id[e] = id_of(bg->gate_fd[e], true);
	bg->tally_id = id_of(bg->tally_fd, true);
	beside_open(bg, live_beside);
	for (int k = 0; k < BESIDE_PARTS; k++)
		safe_close(live_beside[k]);
	scan_slots(bg);
	for (uint32_t e = 0; e < DG_GATE_SETS; e++) {
		if (!fresh[e])
			clear_strays(bg, e);
	}
	return 0;
}

void onegate_repin(const struct bpfgate *bg)
{
	char name[64], path[PATH_MAX];

	if (bg->tally_fd < 0)
		return;
	for (uint32_t e = 0; e < DG_GATE_SETS; e++) {
		slots_name(name, sizeof(name), e);
		if (pin_at(bg, path, sizeof(path), name) == 0 && access(path, F_OK) < 0 &&
		    bpf_obj_pin(bg->slots_fd[e], path) < 0)
			log_warning_errno(errno, "cannot pin %s again: %m", path);
		prog_pin_name(name, sizeof(name), false, e);
		if (pin_at(bg, path, sizeof(path), name) == 0 && access(path, F_OK) < 0)
			(void)pin_prog(bg, bg->gate_fd[e], false, e);
	}
	prog_pin_name(name, sizeof(name), true, 0);
	if (pin_at(bg, path, sizeof(path), name) == 0 && access(path, F_OK) < 0)
		(void)pin_prog(bg, bg->tally_fd, true, 0);
	for (int k = 0; k < BESIDE_PARTS; k++) {
		int fd = k == BESIDE_MARK ? bg->mark_fd : bg->beside_fd[k];

		if (fd >= 0 && pin_at(bg, path, sizeof(path), beside_pins[k]) == 0 &&
		    access(path, F_OK) < 0)
			(void)bpf_obj_pin(fd, path);
	}
}

void onegate_close(struct bpfgate *bg)
{
	for (uint32_t e = 0; e < DG_GATE_SETS; e++) {
		bg->gate_fd[e] = safe_close(bg->gate_fd[e]);
		bg->slots_fd[e] = safe_close(bg->slots_fd[e]);
		free(bg->slot_cg[e]);
		bg->slot_cg[e] = NULL;
	}
	bg->tally_fd = safe_close(bg->tally_fd);
	for (int k = BESIDE_A; k <= BESIDE_B; k++) {
		bg->beside_fd[k] = safe_close(bg->beside_fd[k]);
		bg->beside_id[k] = 0;
	}
	bg->mark_fd = safe_close(bg->mark_fd);
	bg->mark_id = 0;
}

int onegate_beside_of(const struct bpfgate *bg, uint32_t prog_id)
{
	for (int k = BESIDE_A; k <= BESIDE_B; k++) {
		if (prog_id && bg->beside_id[k] == prog_id)
			return k;
	}
	return -1;
}

int onegate_set_of(const struct bpfgate *bg, uint32_t prog_id)
{
	for (uint32_t e = 0; e < DG_GATE_SETS; e++) {
		if (prog_id && bg->gate_id[e] == prog_id)
			return (int)e;
	}
	return -1;
}

int onegate_state_get(const struct bpfgate *bg, uint64_t cgid, struct dg_cgstate *st)
{
	*st = (struct dg_cgstate){ 0 };
	return bpf_map_lookup_elem(bg->map_fd[MAP_CGSTATE], &cgid, st) < 0 ? -errno : 0;
}

int onegate_state_put(const struct bpfgate *bg, uint64_t cgid, const struct dg_cgstate *st)
{
	return bpf_map_update_elem(bg->map_fd[MAP_CGSTATE], &cgid, st, BPF_ANY) < 0 ? -errno : 0;
}

/* The lowest free slot of set, 0 when the set is full. */
static uint32_t slot_find_free(const struct bpfgate *bg, uint32_t set)
{
	for (uint32_t s = 1; s < bg->slot_top[set]; s++) {
		if (!bg->slot_cg[set][s])
			return s;
	}
	return bg->slot_top[set] < DG_MAX_SLOTS ? bg->slot_top[set] : 0;
}

/* The kernel refuses (EINVAL) a program of another expected_attach_type than the array's. */
int onegate_slot_take(struct bpfgate *bg, uint64_t cgid, int orig_fd, uint32_t *set, uint32_t *slot)
{
	int r = -EINVAL;

	for (uint32_t e = 0; e < DG_GATE_SETS && r == -EINVAL; e++) {
		uint32_t s = slot_find_free(bg, e);

		if (!s)
			return -ENOSPC;
		r = bpf_map_update_elem(bg->slots_fd[e], &s, &orig_fd, BPF_ANY) < 0 ? -errno : 0;
		if (r == 0) {
			bg->slot_cg[e][s] = cgid;
			if (s >= bg->slot_top[e])
				bg->slot_top[e] = s + 1;
			*set = e;
			*slot = s;
		}
	}
	return r;
}

void onegate_slot_drop(struct bpfgate *bg, uint32_t set, uint32_t slot)
{
	if (set >= DG_GATE_SETS || !slot || slot >= DG_MAX_SLOTS)
		return;
	if (bpf_map_delete_elem(bg->slots_fd[set], &slot) < 0 && errno != ENOENT)
		log_warning_errno(errno, "cannot clear slot %u of set %u: %m", slot, set);
	bg->slot_cg[set][slot] = 0;
	while (bg->slot_top[set] > 1 && !bg->slot_cg[set][bg->slot_top[set] - 1])
		bg->slot_top[set]--;
}

/* The program in a slot, 0 when it is empty. */
static uint32_t slot_prog(const struct bpfgate *bg, uint32_t set, uint32_t slot)
{
	uint32_t id = 0;

	if (set >= DG_GATE_SETS || !slot || bpf_map_lookup_elem(bg->slots_fd[set], &slot, &id) < 0)
		return 0;
	return id;
}

/* Puts runtime program orig_id back in an emptied slot. */
static int slot_refill(const struct bpfgate *bg, uint32_t set, uint32_t slot, uint32_t orig_id)
{
	auto_close int fd = bpf_prog_get_fd_by_id(orig_id);

	if (fd < 0)
		return -errno;
	return bpf_map_update_elem(bg->slots_fd[set], &slot, &fd, BPF_ANY) < 0 ? -errno : 0;
}

/*
 * The slots are found in cgid's storage while the cgroup lives, else among
 * the slots devgated saw it take (the storage died with the cgroup).
 */
void onegate_forget(struct bpfgate *bg, uint64_t cgid)
{
	struct dg_cgstate st;

	if (onegate_state_get(bg, cgid, &st) == 0) {
		struct dg_cgstate none = { 0 };

		for (uint32_t e = 0; e < DG_GATE_SETS; e++) {
			if (st.slot[e] && bg->slot_cg[e][st.slot[e] % DG_MAX_SLOTS] == cgid)
				onegate_slot_drop(bg, e, st.slot[e]);
		}
		(void)onegate_state_put(bg, cgid, &none);
	}
	for (uint32_t e = 0; e < DG_GATE_SETS; e++) {
		for (uint32_t s = 1; s < bg->slot_top[e]; s++) {
			if (bg->slot_cg[e][s] == cgid)
				onegate_slot_drop(bg, e, s);
		}
	}
}

int onegate_list(const struct bpfgate *bg, uint64_t **ret, size_t *ret_n)
{
	uint64_t key, *prev = NULL;
	auto_free uint64_t *ids = NULL;
	size_t n = 0, cap = 0;

	while (bpf_map_get_next_key(bg->map_fd[MAP_CGSTATE], prev, &key) == 0) {
		if (ARRAY_GROW(ids, n, cap) < 0)
			return -ENOMEM;
		ids[n++] = key;
		prev = &ids[n - 1];
	}
	*ret = TAKE_PTR(ids);
	*ret_n = n;
	return 0;
}

int onegate_state_point(struct bpfgate *bg, uint64_t cgid, uint32_t set, uint32_t slot,
			uint32_t orig_id)
{
	struct dg_cgstate st;
	int r = onegate_state_get(bg, cgid, &st);

	if (r < 0)
		return r;
	if (st.slot[set] && st.slot[set] != slot && st.slot[set] < DG_MAX_SLOTS &&
	    bg->slot_cg[set][st.slot[set]] == cgid)
		onegate_slot_drop(bg, set, st.slot[set]);
	st.cgroup_id = cgid;
	st.slot[set] = slot;
	st.orig[set] = orig_id;
	return onegate_state_put(bg, cgid, &st);
}

/*
 * A gate is described from the storage: its set's slot and the runtime
 * program there; a set's gate with no slot is the default gate.
 */
int onegate_read(const struct bpfgate *bg, uint64_t cgid, int cgfd, struct pinned *out, size_t max,
		 size_t *n)
{
	struct attached now = { 0 };
	struct dg_cgstate st;
	bool have_st = false;
	int r;

	if (cgfd < 0 || bg->tally_fd < 0)
		return 0;
	r = cgprog_query(cgfd, false, &now);
	if (r < 0)
		return r;
	for (uint32_t i = 0; i < now.n && *n < max; i++) {
		int set = onegate_set_of(bg, now.ids[i]);
		struct pinned p = { .id = now.ids[i], .shared = true };

		if (now.ids[i] == bg->tally_id) {
			p.kind = PIN_TALLY;
		} else if (onegate_beside_of(bg, now.ids[i]) >= 0) {
			p.kind = PIN_BESIDE;
		} else if (bg->mark_id && now.ids[i] == bg->mark_id) {
			p.kind = PIN_MARK;
		} else if (set >= 0) {
			if (!have_st && onegate_state_get(bg, cgid, &st) < 0)
				st = (struct dg_cgstate){ 0 };
			have_st = true;
			p.set = (uint32_t)set;
			p.slot = st.slot[set];
			p.orig_id = st.orig[set];
			p.kind = p.slot ? PIN_GATE : PIN_DEFAULT;
		} else {
			continue;
		}
		out[(*n)++] = p;
	}
	return 0;
}

void onegate_release(struct bpfgate *bg, uint64_t cgid, const struct pinned *p)
{
	struct dg_cgstate st;

	if (!p->shared || p->kind != PIN_GATE)
		return;
	if (onegate_state_get(bg, cgid, &st) == 0 && st.slot[p->set] == p->slot) {
		st.slot[p->set] = 0;
		st.orig[p->set] = 0;
		(void)onegate_state_put(bg, cgid, &st);
	}
	onegate_slot_drop(bg, p->set, p->slot);
}

/* The kernel empties a prog array when its map's last pin and fd go. */
void onegate_refill(const struct bpfgate *bg, uint64_t cgid, const struct pinned *p)
{
	int r;

	if (!p->orig_id || slot_prog(bg, p->set, p->slot))
		return;
	r = slot_refill(bg, p->set, p->slot, p->orig_id);
	if (r < 0)
		log_error_errno(r, "cgroup %llu: gate slot lost runtime program %u: %m",
				(unsigned long long)cgid, p->orig_id);
	else
		log_notice("cgroup %llu: gate slot held runtime program %u again",
			   (unsigned long long)cgid, p->orig_id);
}
