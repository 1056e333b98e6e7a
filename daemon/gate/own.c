// SPDX-License-Identifier: Apache-2.0
/*
 * Whose program is this? Names prove nothing: a program on a cgroup is
 * devgate's when it is named devgate_gate, devgate_tally or devgate_beside
 * and counts in devgated's counters map. A devgate program that counts in another map is
 * an orphan of maps that were lost. With that proof, programs whose pins
 * were lost (pins removed, bpffs remounted, devgated restarted) are pinned
 * again and their emptied slots refilled from the keeper; orphans, and
 * shared gates of an earlier run, give their place back to the runtime
 * program they wrapped, for the current gate to wrap again.
 *
 * It repairs only: it never wraps a runtime program nor removes a guard
 * (guard.c does both); an earlier release's beside gate comes off only
 * once the current one (and its lookout) is attached after it. With the
 * same proof it lists the programs on a cgroup and its ancestors that are
 * not devgate's (foreign.h), and only reads there.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <bpf/bpf.h>

#include "cleanup.h"
#include "foreign.h"
#include "log.h"
#include "onegate.h"
#include "own.h"
#include "sys/cgroup.h"
#include "sys/fault.h"
#include "util.h"

/* What a program attached to a cgroup is, proven from the kernel. */
enum own_kind {
	OWN_NONE,   /* a runtime's (or anyone else's) program */
	OWN_GATE,   /* our gate: named devgate_gate, counting in our counters map */
	OWN_TALLY,  /* our tally */
	OWN_ORPHAN, /* a devgate program counting in another counters map */
	OWN_BESIDE, /* a beside gate or lookout, ours or not, that is not one loaded now */
};

struct own_prog {
	enum own_kind kind;
	struct dg_self self;
	uint32_t slot_map_id; /* the gate's runtime_prog array, 0: none */
	uint32_t slot_prog;   /* what the slot holds now, 0: empty */
	int shared_set;	      /* a shared gate's set (its array is dg_slots<SET>_v1), or -1 */
	bool mark;	      /* OWN_BESIDE: a lookout */
};

/* Reads what map map_id tells of the program that uses it into o, ours and theirs. */
static void own_map(int map_id, uint32_t counters_id, struct own_prog *o, bool *ours, bool *theirs)
{
	struct bpf_map_info info = { 0 };
	uint32_t len = sizeof(info), zero = 0;
	auto_close int fd = bpf_map_get_fd_by_id((uint32_t)map_id);

	if (fd < 0 || bpf_obj_get_info_by_fd(fd, &info, &len) < 0)
		return;
	if (strcmp(info.name, DG_VNAME(dg_counters)) == 0) {
		*ours |= info.id == counters_id;
		*theirs |= info.id != counters_id;
	} else if (strcmp(info.name, "self") == 0 && info.value_size >= sizeof(o->self)) {
		(void)bpf_map_lookup_elem(fd, &zero, &o->self);
	} else if (info.type == BPF_MAP_TYPE_PROG_ARRAY && onegate_array_set(info.name) >= 0) {
		o->shared_set = onegate_array_set(info.name);
	} else if (info.type == BPF_MAP_TYPE_PROG_ARRAY) {
		o->slot_map_id = info.id;
		if (bpf_map_lookup_elem(fd, &zero, &o->slot_prog) < 0)
			o->slot_prog = 0;
	}
}

/* Whether one of the maps map_ids has the kernel name name. */
static bool own_uses(const uint32_t *map_ids, uint32_t n, const char *name)
{
	for (uint32_t i = 0; i < n && i < 16; i++) {
		struct bpf_map_info info = { 0 };
		uint32_t len = sizeof(info);
		auto_close int fd = bpf_map_get_fd_by_id(map_ids[i]);

		if (fd >= 0 && bpf_obj_get_info_by_fd(fd, &info, &len) == 0 &&
		    strcmp(info.name, name) == 0)
			return true;
	}
	return false;
}

/* Describes attached program id into o: whether it is ours, and what it holds. */
static int own_prog(const struct bpfgate *bg, uint32_t id, struct own_prog *o)
{
	uint32_t map_ids[16];
	struct bpf_prog_info info = { 0 };
	uint32_t len = sizeof(info);
	auto_close int fd = bpf_prog_get_fd_by_id(id);
	bool ours = false, theirs = false;

	*o = (struct own_prog){ .kind = OWN_NONE, .shared_set = -1 };
	if (fd < 0)
		return -errno;
	info.nr_map_ids = ARRAY_SIZE(map_ids);
	info.map_ids = (uint64_t)(uintptr_t)map_ids;
	if (bpf_obj_get_info_by_fd(fd, &info, &len) < 0)
		return -errno;
	if (strcmp(info.name, "devgate_gate") != 0 && strcmp(info.name, "devgate_tally") != 0 &&
	    strcmp(info.name, "devgate_beside") != 0 && strcmp(info.name, "devgate_mark") != 0)
		return 0;
	for (uint32_t i = 0; i < info.nr_map_ids && i < ARRAY_SIZE(map_ids); i++)
		own_map((int)map_ids[i], bg->counters_id, o, &ours, &theirs);
	/* The lookout counts nothing: its name and its map's tell. */
	if (strcmp(info.name, "devgate_mark") == 0 && id != bg->mark_id &&
	    own_uses(map_ids, info.nr_map_ids, DG_VNAME(dg_mark))) {
		o->kind = OWN_BESIDE;
		o->mark = true;
	} else if ((ours || theirs) && strcmp(info.name, "devgate_beside") == 0)
		o->kind = onegate_beside_of(bg, id) >= 0 ? OWN_NONE : OWN_BESIDE;
	else if (ours)
		o->kind = strcmp(info.name, "devgate_gate") == 0 ? OWN_GATE : OWN_TALLY;
	else if (theirs)
		o->kind = OWN_ORPHAN;
	return 0;
}

/* Refills a copy's emptied slot (its last pin went); the keeper still holds orig. */
static int refill_slot(const struct own_prog *o)
{
	auto_close int map_fd = bpf_map_get_fd_by_id(o->slot_map_id);
	auto_close int orig_fd = bpf_prog_get_fd_by_id(o->self.orig_id);
	uint32_t zero = 0;

	if (map_fd < 0 || orig_fd < 0)
		return -errno;
	return bpf_map_update_elem(map_fd, &zero, &orig_fd, BPF_ANY) < 0 ? -errno : 0;
}

/* Pins the attached program id, and its slot map, under the names a guard reads. */
static int repin_own(const char *dir, uint32_t id, const struct own_prog *o)
{
	auto_close int fd = bpf_prog_get_fd_by_id(id);
	auto_close int map_fd = -1;
	char name[32];
	int r;

	if (fd < 0)
		return -errno;
	if (o->kind == OWN_TALLY)
		return pinned_pin(fd, dir, "tally");
	if (!o->self.orig_id)
		return pinned_pin(fd, dir, "gate-default");
	snprintf(name, sizeof(name), "slot-%u", o->self.orig_id);
	map_fd = bpf_map_get_fd_by_id(o->slot_map_id);
	r = map_fd < 0 ? -errno : pinned_pin(map_fd, dir, name);
	snprintf(name, sizeof(name), "gate-%u", o->self.orig_id);
	return r < 0 ? r : pinned_pin(fd, dir, name);
}

/*
 * A devgate program counting in a counters map no longer ours (pins lost with
 * their maps, and nothing proved them): put its runtime program back in its place,
 * so our own gate wraps that, never the orphan.
 */
static int unwrap_orphan(struct keeper *k, int cgfd, uint32_t id, const struct own_prog *o,
			 uint32_t cg_flags)
{
	auto_close int fd = bpf_prog_get_fd_by_id(id);
	auto_close int orig_fd = o->self.orig_id ? bpf_prog_get_fd_by_id(o->self.orig_id) : -1;
	bool multi = cg_flags & BPF_F_ALLOW_MULTI;
	int r;

	if (fd < 0)
		return -errno;
	if (orig_fd < 0)
		r = bpf_prog_detach2(fd, cgfd, BPF_CGROUP_DEVICE) < 0 ? -errno : 0;
	else
		r = cgprog_attach(orig_fd, cgfd, multi ? BPF_F_ALLOW_MULTI : cg_flags,
				  multi ? fd : -1);
	if (r == 0 && o->self.orig_id)
		keeper_release(k, o->self.orig_id);
	return r;
}

/*
 * A shared gate of ours, but not the one loaded now (its majors changed
 * between two devgated runs): its runtime program, named in the storage,
 * goes back in its place and its slot is let go; the current gate then
 * wraps that program like any other.
 */
static int unwrap_old_shared(struct bpfgate *bg, uint64_t cgid, int cgfd,
			     const struct attached *now, uint32_t i, struct own_prog *o)
{
	struct dg_cgstate st;
	uint32_t set = (uint32_t)o->shared_set;
	int r;

	if (onegate_state_get(bg, cgid, &st) == 0)
		o->self.orig_id = st.orig[set];
	r = unwrap_orphan(&bg->keeper, cgfd, now->ids[i], o, now->flags);
	if (r < 0)
		return r;
	if (st.slot[set]) {
		onegate_slot_drop(bg, set, st.slot[set]);
		st.slot[set] = st.orig[set] = 0;
		(void)onegate_state_put(bg, cgid, &st);
	}
	log_notice("cgroup %llu: unwrapped an earlier shared gate (program %u)",
		   (unsigned long long)cgid, now->ids[i]);
	return 1;
}

/*
 * Ours after an earlier beside gate that is to come off (another release's,
 * whose lookout hands on what it saw another way): the current lookout,
 * then the current beside gate last, so that a granted device stays open
 * while the earlier one goes. Nothing where ours are not loaded.
 */
static int beside_before_off(const struct bpfgate *bg, int cgfd)
{
	struct attached now = { 0 };
	int r = cgprog_query(cgfd, false, &now);

	if (r < 0 || bg->beside_fd[BESIDE_A] < 0 || !(now.flags & BPF_F_ALLOW_MULTI) ||
	    (bg->need_mark && bg->mark_fd < 0))
		return r;
	if (bg->need_mark && !cgprog_has(&now, bg->mark_id))
		r = cgprog_attach(bg->mark_fd, cgfd, BPF_F_ALLOW_MULTI | BPF_F_PREORDER, -1);
	if (r == 0 && !cgprog_has(&now, bg->beside_id[BESIDE_A]) &&
	    !cgprog_has(&now, bg->beside_id[BESIDE_B]))
		r = cgprog_attach(bg->beside_fd[BESIDE_A], cgfd, BPF_F_ALLOW_MULTI, -1);
	return r;
}

/* Pins are a convenience, not the truth: the programs on the cgroup are. */
int own_recover(struct bpfgate *bg, uint64_t cgid, const char *dir, int cgfd,
		const struct pinned *pins, size_t n_pins, const struct attached *now)
{
	uint32_t marks[MAX_PROGS];
	uint32_t n_marks = 0;
	int fixed = 0;

	for (uint32_t i = 0; i < now->n; i++) {
		struct own_prog o;
		int r;

		if (pinned_find(pins, n_pins, now->ids[i]) || own_prog(bg, now->ids[i], &o) < 0 ||
		    o.kind == OWN_NONE)
			continue;
		if (o.kind == OWN_BESIDE && o.mark) {
			marks[n_marks++] = now->ids[i];
			continue;
		}
		if (o.kind == OWN_BESIDE) {
			/* It holds nothing of the runtime's: off it comes, ours in place first. */
			r = beside_before_off(bg, cgfd);
			if (r == 0) {
				fault_point("own.beside_off");
				r = cgprog_detach(now->ids[i], cgfd);
			}
			if (r < 0)
				return r;
			log_notice("cgroup %llu: detached an earlier beside gate (program %u)",
				   (unsigned long long)cgid, now->ids[i]);
			fixed++;
			continue;
		}
		if (o.shared_set >= 0) {
			r = o.kind == OWN_GATE ? unwrap_old_shared(bg, cgid, cgfd, now, i, &o) : 0;
			if (r < 0)
				return r;
			fixed += r;
			continue;
		}
		if (mkdir(dir, 0700) < 0 && errno != EEXIST)
			return -errno;
		if (o.kind == OWN_ORPHAN)
			r = unwrap_orphan(&bg->keeper, cgfd, now->ids[i], &o, now->flags);
		else
			r = repin_own(dir, now->ids[i], &o);
		if (r < 0)
			return r;
		/* After the pin: a prog array's entries go when its last pin or fd does. */
		if (o.kind == OWN_GATE && o.self.orig_id && !o.slot_prog) {
			r = refill_slot(&o);
			if (r < 0)
				log_error_errno(r,
						"cgroup %llu: gate %u lost runtime program %u: %m",
						(unsigned long long)cgid, now->ids[i],
						o.self.orig_id);
			else
				log_notice("cgroup %llu: gate %u holds runtime program %u again",
					   (unsigned long long)cgid, now->ids[i], o.self.orig_id);
		}
		log_notice("cgroup %llu: %s %s program %u", (unsigned long long)cgid,
			   o.kind == OWN_ORPHAN ? "unwrapped orphaned" : "re-pinned its",
			   o.kind == OWN_TALLY ? "tally" : "gate", now->ids[i]);
		fixed++;
	}
	/* An earlier lookout goes once the gates that read it are off. */
	for (uint32_t i = 0; i < n_marks; i++) {
		int r = cgprog_detach(marks[i], cgfd);

		if (r < 0)
			return r;
		fixed++;
	}
	return fixed;
}

/*
 * The kernel clears a prog array when its last pin or fd goes, and does it
 * later, from a work queue, so a slot refilled at once can be emptied
 * again: the caller checks on every inspection.
 */
void own_refill(const struct bpfgate *bg, uint64_t cgid, const char *dir, const struct pinned *pins,
		size_t n_pins)
{
	for (size_t i = 0; i < n_pins; i++) {
		char path[PATH_MAX], name[32];
		uint32_t zero = 0, held = 0;
		auto_close int map_fd = -1, orig_fd = -1;

		if (pins[i].kind != PIN_GATE)
			continue;
		if (pins[i].shared) {
			onegate_refill(bg, cgid, &pins[i]);
			continue;
		}
		snprintf(name, sizeof(name), "slot-%u", pins[i].orig_id);
		if (pinned_path(path, sizeof(path), dir, name) < 0)
			continue;
		map_fd = bpf_obj_get(path);
		if (map_fd < 0 || bpf_map_lookup_elem(map_fd, &zero, &held) == 0)
			continue;
		orig_fd = bpf_prog_get_fd_by_id(pins[i].orig_id);
		if (orig_fd >= 0 && bpf_map_update_elem(map_fd, &zero, &orig_fd, BPF_ANY) == 0)
			log_notice("cgroup %llu: gate slot held runtime program %u again",
				   (unsigned long long)cgid, pins[i].orig_id);
		else
			log_error_errno(errno, "cgroup %llu: gate slot lost runtime program %u: %m",
					(unsigned long long)cgid, pins[i].orig_id);
	}
}

/* ---- foreign.h: the programs that are not devgate's ---- */

/* True when the attached program id is provably devgate's (a gate or tally, ours or an orphan). */
static bool own_is_devgate(const struct bpfgate *bg, uint32_t id)
{
	struct own_prog o;

	if (onegate_beside_of(bg, id) >= 0 || (bg->mark_id && id == bg->mark_id))
		return true;
	return own_prog(bg, id, &o) == 0 && o.kind != OWN_NONE;
}

/* Adds the programs attached at cgroup path that are not ours to ret. */
static int foreign_at(struct bpfgate *bg, const struct cgroot *root, const char *path,
		      struct foreign_prog *ret, size_t max, size_t *n)
{
	struct attached a = { 0 };
	auto_close int fd = -1;
	int r = cgroup_open_path(root, path, &fd);
	uint32_t after = 0;

	if (r == 0)
		r = cgprog_query(fd, false, &a);
	if (r < 0)
		return r;
	/* A beside gate overrides, for a grant, the programs attached before it. */
	for (uint32_t i = 0; i < a.n; i++)
		after = onegate_beside_of(bg, a.ids[i]) >= 0 ? i + 1 : after;
	for (uint32_t i = after; i < a.n && *n < max; i++) {
		struct bpf_prog_info info = { 0 };
		uint32_t len = sizeof(info);
		auto_close int pfd = -1;

		if (own_is_devgate(bg, a.ids[i]))
			continue;
		ret[*n] = (struct foreign_prog){ .id = a.ids[i] };
		pfd = bpf_prog_get_fd_by_id(a.ids[i]);
		if (pfd >= 0 && bpf_obj_get_info_by_fd(pfd, &info, &len) == 0)
			snprintf(ret[*n].name, sizeof(ret[*n].name), "%s", info.name);
		snprintf(ret[*n].cgroup, sizeof(ret[*n].cgroup), "%.250s", path);
		(*n)++;
	}
	return 0;
}

int foreign_progs(struct bpfgate *bg, const struct cgroot *root, const char *path,
		  struct foreign_prog *ret, size_t max, size_t *ret_n)
{
	char p[PATH_MAX];
	size_t n = 0;

	if (snprintf(p, sizeof(p), "%s", path) >= (int)sizeof(p) || p[0] != '/')
		return -EINVAL;
	for (;;) {
		char *slash = strrchr(p, '/');
		int r = foreign_at(bg, root, p, ret, max, &n);

		if (r < 0 && r != -ENOENT)
			return r;
		if (strcmp(p, "/") == 0)
			break;
		if (slash == p)
			slash[1] = '\0';
		else
			*slash = '\0';
	}
	*ret_n = n;
	return 0;
}

int foreign_effective_digest(int cgfd, uint64_t *ret)
{
	return cgprog_digest_of(cgfd, true, ret);
}
