// SPDX-License-Identifier: Apache-2.0
/*
 * Guarding one cgroup: devgate's gate in place of each runtime program, a
 * default gate where there was none, the tally last; their pins under
 * PIN_ROOT/cg/CGID, the keeper for the programs they stand in for, and the
 * proof from the kernel of which attached programs are devgate's.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "array.h"
#include "bpfgate_int.h"
#include "cleanup.h"
#include "guard.h"
#include "log.h"
#include "util.h"

enum pin_kind {
	PIN_GATE,
	PIN_DEFAULT,
	PIN_TALLY
};

/*
 * One of devgate's programs on a cgroup: a copy found by its pin, or a
 * shared program found attached (shared; its slot read from the storage).
 */
struct pinned {
	enum pin_kind kind;
	uint32_t id;	  /* the program's id */
	uint32_t orig_id; /* PIN_GATE: the runtime program it stands in for */
	bool shared;
	uint32_t set, slot; /* shared PIN_GATE: where orig is */
};

static bool attached_has(const struct attached *a, uint32_t id)
{
	for (uint32_t i = 0; i < a->n; i++) {
		if (a->ids[i] == id)
			return true;
	}
	return false;
}

static int prog_id_of(int fd, uint32_t *ret)
{
	struct bpf_prog_info info = { 0 };
	uint32_t len = sizeof(info);

	if (bpf_obj_get_info_by_fd(fd, &info, &len) < 0)
		return -errno;
	*ret = info.id;
	return 0;
}

static int pin_path(char *buf, size_t len, const char *dir, const char *name)
{
	int n = snprintf(buf, len, "%s/%s", dir, name);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static int parse_pin_name(const char *name, enum pin_kind *kind, uint32_t *orig)
{
	if (strcmp(name, "tally") == 0) {
		*kind = PIN_TALLY;
		return 0;
	}
	if (strcmp(name, "gate-default") == 0) {
		*kind = PIN_DEFAULT;
		return 0;
	}
	if (startswith(name, "gate-") && parse_u32(name + 5, orig) == 0) {
		*kind = PIN_GATE;
		return 0;
	}
	return -EINVAL; /* slot-* and strangers */
}

/* Reads the programs pinned for one cgroup. */
static int read_pin_dir(const char *dir, struct pinned *out, size_t max, size_t *ret_n)
{
	auto_closedir DIR *d = opendir(dir);
	struct dirent *de;
	size_t n = 0;

	if (!d)
		return errno == ENOENT ? (*ret_n = 0, 0) : -errno;
	while ((de = readdir(d))) {
		struct pinned p = { 0 };
		char path[PATH_MAX];
		auto_close int fd = -1;

		if (parse_pin_name(de->d_name, &p.kind, &p.orig_id) < 0 || n == max)
			continue;
		if (pin_path(path, sizeof(path), dir, de->d_name) < 0)
			continue;
		fd = bpf_obj_get(path);
		if (fd < 0 || prog_id_of(fd, &p.id) < 0)
			continue;
		out[n++] = p;
	}
	*ret_n = n;
	return 0;
}

/* The shared programs attached to cgfd, described from the kernel. */
static int read_shared(const struct bpfgate *bg, uint64_t cgid, int cgfd, struct pinned *out,
		       size_t max, size_t *n)
{
	struct attached now = { 0 };
	struct dg_cgstate st;
	bool have_st = false;
	int r;

	if (cgfd < 0 || bg->tally_fd < 0)
		return 0;
	r = bpfgate_query(cgfd, false, &now);
	if (r < 0)
		return r;
	for (uint32_t i = 0; i < now.n && *n < max; i++) {
		int set = onegate_set_of(bg, now.ids[i]);
		struct pinned p = { .id = now.ids[i], .shared = true };

		if (now.ids[i] == bg->tally_id) {
			p.kind = PIN_TALLY;
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

/* devgate's programs on a cgroup: pinned copies, then shared programs attached. */
static int read_pins(const struct bpfgate *bg, uint64_t cgid, const char *dir, int cgfd,
		     struct pinned *out, size_t max, size_t *ret_n)
{
	int r = read_pin_dir(dir, out, max, ret_n);

	return r < 0 ? r : read_shared(bg, cgid, cgfd, out, max, ret_n);
}

static void unpin(const char *dir, const char *name)
{
	char path[PATH_MAX];

	if (pin_path(path, sizeof(path), dir, name) == 0 && unlink(path) < 0 && errno != ENOENT)
		log_warning_errno(errno, "cannot remove pin %s: %m", path);
}

/* A shared gate's slot and storage entry go: its runtime program is back, or gone. */
static void release_slot(struct bpfgate *bg, uint64_t cgid, const struct pinned *p)
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

static void unpin_one(const char *dir, const struct pinned *p)
{
	char name[64];

	if (p->shared)
		return;
	switch (p->kind) {
	case PIN_TALLY:
		unpin(dir, "tally");
		break;
	case PIN_DEFAULT:
		unpin(dir, "gate-default");
		break;
	case PIN_GATE:
		snprintf(name, sizeof(name), "gate-%u", p->orig_id);
		unpin(dir, name);
		snprintf(name, sizeof(name), "slot-%u", p->orig_id);
		unpin(dir, name);
		break;
	}
}

static int pin_fd(int fd, const char *dir, const char *name)
{
	char path[PATH_MAX];
	int r = pin_path(path, sizeof(path), dir, name);

	if (r < 0)
		return r;
	(void)unlink(path); /* a stale pin of a program no longer attached */
	return bpf_obj_pin(fd, path) < 0 ? -errno : 0;
}

static int attach(int prog_fd, int cgfd, uint32_t flags, int replace_fd)
{
	LIBBPF_OPTS(bpf_prog_attach_opts, opts, .flags = flags);

	if (replace_fd >= 0) {
		opts.flags |= BPF_F_REPLACE;
		opts.replace_prog_fd = replace_fd;
	}
	return bpf_prog_attach_opts(prog_fd, cgfd, BPF_CGROUP_DEVICE, &opts) < 0 ? -errno : 0;
}

static int slot_set(struct devgate *skel, int orig_fd)
{
	uint32_t key = 0;

	return bpf_map_update_elem(bpf_map__fd(skel->maps.runtime_prog), &key, &orig_fd, BPF_ANY) <
			       0
		       ? -errno
		       : 0;
}

/*
 * A copy whose gate holds runtime program orig_fd in its slot: the spare if
 * it fits, else a fresh load. The prog array accepts orig only if the gate
 * shares its expected_attach_type: runc, crun and LXC load with 0 (as the
 * spare is), libbpf-based loaders with BPF_CGROUP_DEVICE.
 */
static int copy_for_wrap(struct bpfgate *bg, int orig_fd, struct devgate **ret)
{
	static const enum bpf_attach_type eats[] = { 0, BPF_CGROUP_DEVICE };
	int r = -EINVAL;

	if (bg->spare) {
		r = slot_set(bg->spare, orig_fd);
		if (r == 0) {
			*ret = TAKE_PTR(bg->spare);
			return 0;
		}
		if (r != -EINVAL)
			return r;
	}
	for (size_t i = 0; i < ARRAY_SIZE(eats); i++) {
		auto_cleanup(devgate_destroyp) struct devgate *skel = NULL;

		if (eats[i] == 0 && r == -EINVAL && bg->spare)
			continue; /* the spare just showed 0 does not fit */
		r = bpfgate_load_copy(bg, ROLE_PROGS, true, eats[i], &skel);
		if (r < 0)
			return r;
		r = slot_set(skel, orig_fd);
		if (r == 0) {
			*ret = TAKE_PTR(skel);
			return 0;
		}
		if (r != -EINVAL)
			return r;
	}
	return r;
}

/* Keeps the first copy loaded for a cgroup: its tally may be needed next. */
static void keep_for_tally(struct devgate **skel, struct devgate **tally_src)
{
	if (!*tally_src)
		*tally_src = TAKE_PTR(*skel);
}

static const struct pinned *find_pinned(const struct pinned *pins, size_t n, uint32_t id)
{
	for (size_t i = 0; i < n; i++) {
		if (pins[i].id == id)
			return &pins[i];
	}
	return NULL;
}

/* What a program attached to a cgroup is, proven from the kernel. */
enum own_kind {
	OWN_NONE,   /* a runtime's (or anyone else's) program */
	OWN_GATE,   /* our gate: named devgate_gate, reading our grants map */
	OWN_TALLY,  /* our tally */
	OWN_ORPHAN, /* a devgate program reading another grants map */
};

struct own_prog {
	enum own_kind kind;
	struct dg_self self;
	uint32_t slot_map_id; /* the gate's runtime_prog array, 0: none */
	uint32_t slot_prog;   /* what the slot holds now, 0: empty */
	int shared_set;	      /* a shared gate's set (its array is dg_slots<SET>_v1), or -1 */
};

static void own_map(int map_id, uint32_t counters_id, struct own_prog *o, bool *ours, bool *theirs)
{
	struct bpf_map_info info = { 0 };
	uint32_t len = sizeof(info), zero = 0;
	auto_close int fd = bpf_map_get_fd_by_id((uint32_t)map_id);

	if (fd < 0 || bpf_obj_get_info_by_fd(fd, &info, &len) < 0)
		return;
	if (strcmp(info.name, "dg_counters_v1") == 0) {
		*ours |= info.id == counters_id;
		*theirs |= info.id != counters_id;
	} else if (strcmp(info.name, "self") == 0 && info.value_size >= sizeof(o->self)) {
		(void)bpf_map_lookup_elem(fd, &zero, &o->self);
	} else if (info.type == BPF_MAP_TYPE_PROG_ARRAY && startswith(info.name, "dg_slots")) {
		o->shared_set = info.name[8] == '1';
	} else if (info.type == BPF_MAP_TYPE_PROG_ARRAY) {
		o->slot_map_id = info.id;
		if (bpf_map_lookup_elem(fd, &zero, &o->slot_prog) < 0)
			o->slot_prog = 0;
	}
}

/* Names alone prove nothing: ours are the programs that use our counters map. */
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
	if (strcmp(info.name, "devgate_gate") != 0 && strcmp(info.name, "devgate_tally") != 0)
		return 0;
	for (uint32_t i = 0; i < info.nr_map_ids && i < ARRAY_SIZE(map_ids); i++)
		own_map((int)map_ids[i], bg->counters_id, o, &ours, &theirs);
	if (ours)
		o->kind = strcmp(info.name, "devgate_gate") == 0 ? OWN_GATE : OWN_TALLY;
	else if (theirs)
		o->kind = OWN_ORPHAN;
	return 0;
}

/* A gate's slot emptied (its last pin went): the keeper still holds orig. */
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
		return pin_fd(fd, dir, "tally");
	if (!o->self.orig_id)
		return pin_fd(fd, dir, "gate-default");
	snprintf(name, sizeof(name), "slot-%u", o->self.orig_id);
	map_fd = bpf_map_get_fd_by_id(o->slot_map_id);
	r = map_fd < 0 ? -errno : pin_fd(map_fd, dir, name);
	snprintf(name, sizeof(name), "gate-%u", o->self.orig_id);
	return r < 0 ? r : pin_fd(fd, dir, name);
}

/*
 * A devgate program of a grants map no longer ours (pins lost with their
 * maps, and nothing proved them): put its runtime program back in its place,
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
		r = attach(orig_fd, cgfd, multi ? BPF_F_ALLOW_MULTI : cg_flags, multi ? fd : -1);
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
 * Pins are a convenience, not the truth: programs on the cgroup that are
 * provably ours but not pinned (pins removed, bpffs remounted, devgated
 * restarted) are pinned again, their empty slots refilled from the keeper;
 * orphans are replaced by what they wrapped.
 */
static int recover_pins(struct bpfgate *bg, uint64_t cgid, const char *dir, int cgfd,
			const struct pinned *pins, size_t n_pins, const struct attached *now)
{
	int fixed = 0;

	for (uint32_t i = 0; i < now->n; i++) {
		struct own_prog o;
		int r;

		if (find_pinned(pins, n_pins, now->ids[i]) || own_prog(bg, now->ids[i], &o) < 0 ||
		    o.kind == OWN_NONE)
			continue;
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
	return fixed;
}

/* Remembers who keeps runtime program id open, if anyone (runc keeps nothing). */
static void find_owner(struct bpfgate *bg, uint64_t cgid, int cgfd, uint32_t id)
{
	struct prog_owner o = { .cgid = cgid, .prog_id = id };
	size_t slot = bg->owners_next++ % MAX_OWNERS; /* the oldest, if none is free */

	if (progfd_owner(cgfd, id, &o.proc) != 1)
		return;
	for (size_t i = 0; i < MAX_OWNERS; i++) {
		if (!bg->owners[i].cgid) {
			slot = i;
			break;
		}
	}
	bg->owners[slot] = o;
}

/* Looks for the owners of the programs wrapped since the last call (of cgid; 0: all). */
static void find_pending(struct bpfgate *bg, uint64_t cgid, bool drop)
{
	unsigned int k = 0;

	for (unsigned int i = 0; i < bg->n_pending; i++) {
		struct pending_owner *p = &bg->pending[i];

		if (cgid && p->cgid != cgid) {
			bg->pending[k++] = *p;
			continue;
		}
		if (!drop)
			find_owner(bg, p->cgid, p->cgfd, p->prog_id);
		safe_close(p->cgfd);
	}
	bg->n_pending = k;
}

/*
 * The look (the parents' open fds in /proc) costs more than the rest of a
 * first grant, and only a runtime that moves to a new program (LXC) needs
 * its answer: it is done when devgated is idle, or before a guard of the
 * same cgroup judges such a move.
 */
static void note_owner(struct bpfgate *bg, uint64_t cgid, int cgfd, uint32_t id)
{
	int fd;

	if (bg->n_pending == MAX_PENDING)
		find_pending(bg, 0, false);
	fd = fcntl(cgfd, F_DUPFD_CLOEXEC, 3);
	if (fd < 0) {
		find_owner(bg, cgid, cgfd, id);
		return;
	}
	bg->pending[bg->n_pending++] =
		(struct pending_owner){ .cgid = cgid, .prog_id = id, .cgfd = fd };
}

void guard_idle(struct bpfgate *bg)
{
	find_pending(bg, 0, false);
}

void guard_init(struct bpfgate *bg, const int *leased_cgfds, size_t n_leased)
{
	int r = onegate_open(bg, leased_cgfds, n_leased);

	if (r == 0)
		return;
	/* Per-cgroup copies still work, at the old cost. */
	log_warning_errno(
		r, "cannot load devgate's shared programs: %m; each cgroup gets its own copy");
	onegate_close(bg);
}

void guard_repin(struct bpfgate *bg)
{
	onegate_repin(bg);
}

void guard_fini(struct bpfgate *bg)
{
	if (!bg)
		return;
	onegate_close(bg);
	/* Kept while devgated runs: made again for every first grant, they cost more than they
	 * hold. */
	keeper_tidy(&bg->keeper);
}

/* The set whose shared gate is the default gate: BPF_CGROUP_DEVICE, like a copy's. */
#define DEFAULT_SET 1

/* Names cgid in its storage, which exists once a shared program is attached. */
static int name_cgroup(const struct bpfgate *bg, uint64_t cgid)
{
	struct dg_cgstate st;

	if (onegate_state_get(bg, cgid, &st) == 0 && st.cgroup_id == cgid)
		return 0;
	st.cgroup_id = cgid;
	return onegate_state_put(bg, cgid, &st);
}

static int attach_shared_tally(struct bpfgate *bg, uint64_t cgid, int cgfd, struct dg_error *err)
{
	int r = attach(bg->tally_fd, cgfd, BPF_F_ALLOW_MULTI, -1);

	if (r == 0)
		r = name_cgroup(bg, cgid);
	if (r < 0)
		return dg_error_set(err, DG_E_KERNEL, r, "cannot attach devgate's tally: %s",
				    strerror(-r));
	return 0;
}

/* Points set's field of cgid's storage at slot (0: none), dropping a slot it replaces. */
static int storage_point(struct bpfgate *bg, uint64_t cgid, uint32_t set, uint32_t slot,
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
 * The shared gate in place of orig: slot, storage, one BPF_F_REPLACE. The
 * tally goes first where it is missing: attaching it makes the cgroup's
 * storage, so the gate finds its slot from its first run. 1: done; 0: this
 * cgroup needs a copy (no multi-program mode, or the set's gate already
 * stands in for another program here); <0: failed.
 */
static int wrap_shared(struct bpfgate *bg, uint64_t cgid, int cgfd, int orig_fd, uint32_t orig_id,
		       struct dg_error *err)
{
	struct attached now = { 0 };
	uint32_t set = 0, slot = 0;
	int r;

	if (bg->tally_fd < 0)
		return 0;
	r = bpfgate_query(cgfd, false, &now);
	if (r < 0 || !(now.flags & BPF_F_ALLOW_MULTI))
		return 0;
	r = onegate_slot_take(bg, cgid, orig_fd, &set, &slot);
	if (r == -EINVAL || r == -ENOSPC)
		return 0;
	if (r == 0 && attached_has(&now, bg->gate_id[set])) {
		onegate_slot_drop(bg, set, slot);
		return 0;
	}
	if (r == 0 && !attached_has(&now, bg->tally_id))
		r = attach(bg->tally_fd, cgfd, BPF_F_ALLOW_MULTI, -1);
	if (r == 0)
		r = storage_point(bg, cgid, set, slot, orig_id);
	if (r == 0)
		r = attach(bg->gate_fd[set], cgfd, BPF_F_ALLOW_MULTI, orig_fd);
	if (r < 0) {
		if (slot) {
			(void)storage_point(bg, cgid, set, 0, 0);
			onegate_slot_drop(bg, set, slot);
		}
		return dg_error_set(err, DG_E_KERNEL, r,
				    "cannot put devgate's gate in place of device program %u: %s",
				    orig_id, strerror(-r));
	}
	return 1;
}

/* What every wrap does last: keep orig alive, remember who holds it. */
static void wrapped(struct bpfgate *bg, uint64_t cgid, int cgfd, int orig_fd, uint32_t orig_id)
{
	/* A slot empties with its map's last pin: the kernel keeps orig for us here. */
	int r = keeper_hold(&bg->keeper, orig_fd, orig_id);

	if (r < 0)
		log_warning_errno(
			r, "cannot keep device program %u: %m (it lives as long as its slot)",
			orig_id);
	note_owner(bg, cgid, cgfd, orig_id);
	log_debug("cgroup %llu: gate in place of device program %u", (unsigned long long)cgid,
		  orig_id);
}

/* Replaces runtime program orig_id on cgfd by a gate, atomically. */
static int wrap(struct bpfgate *bg, uint64_t cgid, const char *dir, int cgfd, uint32_t orig_id,
		uint32_t cg_flags, struct devgate **tally_src, struct dg_error *err)
{
	auto_cleanup(devgate_destroyp) struct devgate *skel = NULL;
	auto_close int orig_fd = -1;
	char gate_name[32], slot_name[32];
	bool multi = cg_flags & BPF_F_ALLOW_MULTI;
	int r;

	orig_fd = bpf_prog_get_fd_by_id(orig_id);
	if (orig_fd < 0)
		return dg_error_set(err, DG_E_KERNEL, errno,
				    "cannot take hold of device program %u: %m", orig_id);
	r = wrap_shared(bg, cgid, cgfd, orig_fd, orig_id, err);
	if (r != 0) {
		if (r > 0)
			wrapped(bg, cgid, cgfd, orig_fd, orig_id);
		return r < 0 ? r : 0;
	}
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return dg_error_set(err, DG_E_KERNEL, errno, "cannot create %s: %m", dir);
	r = copy_for_wrap(bg, orig_fd, &skel);
	if (r == 0 && skel)
		r = bpfgate_set_self(skel, cgid, orig_id);
	if (r < 0 || !skel)
		return dg_error_set(err, DG_E_KERNEL, r < 0 ? r : -EIO,
				    "cannot load a gate for device program %u: %s", orig_id,
				    strerror(-r));
	snprintf(gate_name, sizeof(gate_name), "gate-%u", orig_id);
	snprintf(slot_name, sizeof(slot_name), "slot-%u", orig_id);
	r = pin_fd(bpf_map__fd(skel->maps.runtime_prog), dir, slot_name);
	if (r == 0)
		r = pin_fd(bpf_program__fd(skel->progs.devgate_gate), dir, gate_name);
	if (r == 0)
		r = attach(bpf_program__fd(skel->progs.devgate_gate), cgfd,
			   multi ? BPF_F_ALLOW_MULTI : cg_flags, multi ? orig_fd : -1);
	if (r < 0) {
		unpin(dir, gate_name);
		unpin(dir, slot_name);
		return dg_error_set(err, DG_E_KERNEL, r,
				    "cannot put a gate in place of device program %u: %s", orig_id,
				    strerror(-r));
	}
	wrapped(bg, cgid, cgfd, orig_fd, orig_id);
	keep_for_tally(&skel, tally_src);
	return 0;
}

/* Pins prog as name and attaches it last on cgfd. */
static int attach_last(int prog_fd, const char *dir, int cgfd, const char *name,
		       struct dg_error *err)
{
	int r = pin_fd(prog_fd, dir, name);

	if (r == 0)
		r = attach(prog_fd, cgfd, BPF_F_ALLOW_MULTI, -1);
	if (r < 0) {
		unpin(dir, name);
		return dg_error_set(err, DG_E_KERNEL, r, "cannot attach devgate's %s program: %s",
				    name, strerror(-r));
	}
	return 0;
}

/* A cgroup with no device program: the gate with the default policy. */
static int attach_default(struct bpfgate *bg, uint64_t cgid, const char *dir, int cgfd,
			  struct devgate **tally_src, struct dg_error *err)
{
	auto_cleanup(devgate_destroyp) struct devgate *skel = NULL;
	struct dg_cgstate st;
	int r;

	if (bg->gate_fd[DEFAULT_SET] >= 0) {
		/* A storage left from before must not point the new gate at a slot. */
		if (onegate_state_get(bg, cgid, &st) == 0 && st.slot[DEFAULT_SET])
			(void)storage_point(bg, cgid, DEFAULT_SET, 0, 0);
		r = attach(bg->gate_fd[DEFAULT_SET], cgfd, BPF_F_ALLOW_MULTI, -1);
		if (r == 0)
			r = name_cgroup(bg, cgid);
		if (r < 0)
			return dg_error_set(err, DG_E_KERNEL, r,
					    "cannot attach devgate's default gate: %s",
					    strerror(-r));
		return 0;
	}
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return dg_error_set(err, DG_E_KERNEL, errno, "cannot create %s: %m", dir);
	r = bpfgate_load_copy(bg, ROLE_PROGS, false, BPF_CGROUP_DEVICE, &skel);
	if (r == 0)
		r = bpfgate_set_self(skel, cgid, 0);
	if (r < 0 || !skel)
		return dg_error_set(err, DG_E_KERNEL, r < 0 ? r : -EIO,
				    "cannot load devgate's default gate: %s", strerror(-r));
	r = attach_last(bpf_program__fd(skel->progs.devgate_gate), dir, cgfd, "gate-default", err);
	if (r == 0)
		keep_for_tally(&skel, tally_src);
	return r;
}

static int detach_pinned(const struct pinned *p, int cgfd)
{
	auto_close int fd = bpf_prog_get_fd_by_id(p->id);

	if (fd < 0)
		return -errno;
	if (bpf_prog_detach2(fd, cgfd, BPF_CGROUP_DEVICE) < 0 && errno != ENOENT)
		return -errno;
	return 0;
}

/* The tally must come after every gate to see their verdict. */
static int place_tally(struct bpfgate *bg, uint64_t cgid, const char *dir, int cgfd,
		       const struct pinned *pins, size_t n_pins, struct devgate **tally_src,
		       struct dg_error *err)
{
	struct attached now = { 0 };
	const struct pinned *tally = NULL;
	int r;

	for (size_t i = 0; i < n_pins; i++) {
		if (pins[i].kind == PIN_TALLY)
			tally = &pins[i];
	}
	r = bpfgate_query(cgfd, false, &now);
	if (r < 0)
		return dg_error_set(err, DG_E_KERNEL, r, "cannot query device programs: %s",
				    strerror(-r));
	if (!(now.flags & BPF_F_ALLOW_MULTI))
		return 0; /* single-program cgroup: no room for a tally */
	if (tally && now.n && attached_has(&now, tally->id)) {
		auto_close int fd = -1;

		if (now.ids[now.n - 1] == tally->id)
			return 0;
		/* A program attached after it: move the tally back to the end. */
		r = detach_pinned(tally, cgfd);
		if (r == 0)
			fd = bpf_prog_get_fd_by_id(tally->id);
		if (r == 0 && fd < 0)
			r = -errno;
		if (r == 0)
			r = attach(fd, cgfd, BPF_F_ALLOW_MULTI, -1);
		if (r < 0)
			return dg_error_set(err, DG_E_KERNEL, r, "cannot move the tally: %s",
					    strerror(-r));
		return 0;
	}
	if (bg->tally_fd >= 0)
		return attach_shared_tally(bg, cgid, cgfd, err);
	if (!*tally_src) {
		r = bpfgate_load_copy(bg, ROLE_PROGS, true, 0, tally_src);
		if (r == 0 && *tally_src)
			r = bpfgate_set_self(*tally_src, cgid, 0);
		if (r < 0 || !*tally_src)
			return dg_error_set(err, DG_E_KERNEL, r < 0 ? r : -EIO,
					    "cannot load devgate's tally: %s", strerror(-r));
	}
	return attach_last(bpf_program__fd((*tally_src)->progs.devgate_tally), dir, cgfd, "tally",
			   err);
}

void guard_note_replace(struct bpfgate *bg, uint64_t cgid, uint32_t old_id, uint32_t new_id)
{
	bg->replaces[bg->replaces_next++ % MAX_REPLACES] = (struct replace_ask){
		.cgid = cgid,
		.old_id = old_id,
		.new_id = new_id,
	};
}

static bool replace_pending(const struct bpfgate *bg, uint64_t cgid)
{
	for (size_t i = 0; i < MAX_REPLACES; i++) {
		if (bg->replaces[i].cgid == cgid)
			return true;
	}
	return false;
}

static void forget_replaces(struct bpfgate *bg, uint64_t cgid)
{
	for (size_t i = 0; i < MAX_REPLACES; i++) {
		if (bg->replaces[i].cgid == cgid)
			bg->replaces[i] = (struct replace_ask){ 0 };
	}
}

static const struct pinned *gate_for(const struct pinned *pins, size_t n, uint32_t orig_id)
{
	for (size_t i = 0; i < n; i++) {
		if (pins[i].kind == PIN_GATE && pins[i].orig_id == orig_id)
			return &pins[i];
	}
	return NULL;
}

static bool prog_gone(uint32_t id)
{
	auto_close int fd = bpf_prog_get_fd_by_id(id);

	return fd < 0 && errno == ENOENT;
}

static bool asked_replace(const struct bpfgate *bg, uint64_t cgid, uint32_t old_id, uint32_t new_id)
{
	for (size_t i = 0; i < MAX_REPLACES; i++) {
		const struct replace_ask *a = &bg->replaces[i];

		if (a->cgid == cgid && a->old_id == old_id && a->new_id == new_id)
			return true;
	}
	return false;
}

static void forget_owners(struct bpfgate *bg, uint64_t cgid, uint32_t id)
{
	for (size_t i = 0; i < MAX_OWNERS; i++) {
		if (bg->owners[i].cgid == cgid && (!id || bg->owners[i].prog_id == id))
			bg->owners[i] = (struct prog_owner){ 0 };
	}
}

/* The process that kept old open when it was wrapped now keeps new, not old. */
static bool owner_moved_on(const struct bpfgate *bg, uint64_t cgid, uint32_t old_id,
			   uint32_t new_id)
{
	for (size_t i = 0; i < MAX_OWNERS; i++) {
		const struct prog_owner *o = &bg->owners[i];

		if (o->cgid == cgid && o->prog_id == old_id)
			return progfd_holds(&o->proc, old_id) == 0 &&
			       progfd_holds(&o->proc, new_id) == 1;
	}
	return false;
}

/* Same type, same creator, new loaded no earlier than old. */
static bool same_runtime_newer(uint32_t old_id, uint32_t new_id)
{
	struct bpf_prog_info a = { 0 }, b = { 0 };
	uint32_t la = sizeof(a), lb = sizeof(b);
	auto_close int old_fd = bpf_prog_get_fd_by_id(old_id);
	auto_close int new_fd = bpf_prog_get_fd_by_id(new_id);

	if (old_fd < 0 || new_fd < 0 || bpf_obj_get_info_by_fd(old_fd, &a, &la) < 0 ||
	    bpf_obj_get_info_by_fd(new_fd, &b, &lb) < 0)
		return false;
	return a.type == b.type && a.created_by_uid == b.created_by_uid &&
	       b.load_time >= a.load_time;
}

/*
 * Whether the runtime moved from old to new. Its own word is needed: an
 * attach that asked to replace old by new (attach events), or the process
 * that kept old open now keeping new instead (LXC's monitor). A program
 * merely attached later proves nothing: it may be meant to add to old.
 */
static bool superseded(const struct bpfgate *bg, uint64_t cgid, uint32_t old_id, uint32_t new_id)
{
	if (!asked_replace(bg, cgid, old_id, new_id) && !owner_moved_on(bg, cgid, old_id, new_id))
		return false;
	return same_runtime_newer(old_id, new_id);
}

/* The first attached gate whose runtime program another attached gate's supersedes. */
static const struct pinned *find_superseded(const struct bpfgate *bg, uint64_t cgid,
					    const struct pinned *pins, size_t n_pins,
					    const struct attached *now, uint32_t *new_id)
{
	for (size_t i = 0; i < n_pins; i++) {
		if (pins[i].kind != PIN_GATE || !attached_has(now, pins[i].id))
			continue;
		for (size_t j = 0; j < n_pins; j++) {
			if (j == i || pins[j].kind != PIN_GATE || !attached_has(now, pins[j].id) ||
			    !superseded(bg, cgid, pins[i].orig_id, pins[j].orig_id))
				continue;
			*new_id = pins[j].orig_id;
			return &pins[i];
		}
	}
	return NULL;
}

/* An ask is kept while old's gate stands and new may still be attached. */
static void prune_asks(struct bpfgate *bg, uint64_t cgid, const struct pinned *pins, size_t n_pins,
		       const struct attached *now)
{
	for (size_t i = 0; i < MAX_REPLACES; i++) {
		struct replace_ask *a = &bg->replaces[i];
		const struct pinned *old_gate = gate_for(pins, n_pins, a->old_id);
		const struct pinned *new_gate = gate_for(pins, n_pins, a->new_id);

		if (a->cgid != cgid)
			continue;
		if (old_gate && attached_has(now, old_gate->id) &&
		    !(new_gate && attached_has(now, new_gate->id)) && !prog_gone(a->new_id))
			continue;
		*a = (struct replace_ask){ 0 };
	}
}

/* Detaches the gate standing in for old and lets old go. */
static int drop_gate(struct bpfgate *bg, uint64_t cgid, const char *dir, int cgfd,
		     const struct pinned *old, uint32_t new_id, struct dg_error *err)
{
	int r = detach_pinned(old, cgfd);

	if (r < 0)
		return dg_error_set(err, DG_E_KERNEL, r,
				    "cannot detach the gate for device program %u: %s",
				    old->orig_id, strerror(-r));
	unpin_one(dir, old);
	release_slot(bg, cgid, old);
	keeper_release(&bg->keeper, old->orig_id);
	forget_owners(bg, cgid, old->orig_id);
	log_notice("cgroup %llu: the runtime replaced device program %u by %u; "
		   "the gate for %u is removed",
		   (unsigned long long)cgid, old->orig_id, new_id, old->orig_id);
	return 0;
}

/*
 * A runtime that replaces its program (BPF_F_REPLACE) finds a gate in its
 * place and is refused; LXC then attaches the new one beside it and tries
 * to detach the old. Left alone, the old program would go on denying what
 * the new one allows, while granted and after the revoke. Once the new one
 * has its own gate, the old one's goes, as the replace meant.
 */
static int drop_superseded(struct bpfgate *bg, uint64_t cgid, const char *dir, int cgfd,
			   struct dg_error *err)
{
	struct pinned pins[MAX_PROGS];
	struct attached now = { 0 };
	size_t n_pins = 0;
	int r;

	for (;;) {
		const struct pinned *old;
		uint32_t new_id = 0;

		r = read_pins(bg, cgid, dir, cgfd, pins, MAX_PROGS, &n_pins);
		if (r == 0)
			r = bpfgate_query(cgfd, false, &now);
		if (r < 0)
			return dg_error_set(err, DG_E_KERNEL, r, "cannot inspect cgroup %llu: %s",
					    (unsigned long long)cgid, strerror(-r));
		old = find_superseded(bg, cgid, pins, n_pins, &now, &new_id);
		if (!old)
			break;
		r = drop_gate(bg, cgid, dir, cgfd, old, new_id, err);
		if (r < 0)
			return r;
	}
	prune_asks(bg, cgid, pins, n_pins, &now);
	return 0;
}

/* Nothing to do: every program on the cgroup is ours and ours are all there, tally last. */
static bool settled(const struct pinned *pins, size_t n_pins, const struct attached *now)
{
	const struct pinned *tally = NULL;

	if (now->n == 0)
		return false;
	for (uint32_t i = 0; i < now->n; i++) {
		if (!find_pinned(pins, n_pins, now->ids[i]))
			return false;
	}
	for (size_t i = 0; i < n_pins; i++) {
		if (!attached_has(now, pins[i].id))
			return false;
		if (pins[i].kind == PIN_TALLY)
			tally = &pins[i];
	}
	if (!(now->flags & BPF_F_ALLOW_MULTI))
		return true;
	return tally && now->ids[now->n - 1] == tally->id;
}

static void guard_summary(int cgfd, const struct pinned *pins, size_t n_pins, struct guard_info *gi)
{
	struct attached now = { 0 }, eff = { 0 };

	gi->gates = 0;
	gi->tally = 0;
	for (size_t i = 0; i < n_pins; i++) {
		if (pins[i].kind == PIN_TALLY)
			gi->tally = 1;
		else
			gi->gates++;
	}
	if (bpfgate_query(cgfd, false, &now) == 0 && bpfgate_query(cgfd, true, &eff) == 0 &&
	    eff.n > now.n)
		gi->ancestor_progs = eff.n - now.n;
}

/* A shared gate's slot emptied (its map's pins and fds went): orig back in. */
static void refill_shared(const struct bpfgate *bg, uint64_t cgid, const struct pinned *p)
{
	int r;

	if (!p->orig_id || onegate_slot_prog(bg, p->set, p->slot))
		return;
	r = onegate_slot_refill(bg, p->set, p->slot, p->orig_id);
	if (r < 0)
		log_error_errno(r, "cgroup %llu: gate slot lost runtime program %u: %m",
				(unsigned long long)cgid, p->orig_id);
	else
		log_notice("cgroup %llu: gate slot held runtime program %u again",
			   (unsigned long long)cgid, p->orig_id);
}

/* Pins and attached programs of a cgroup, after recovering lost pins. */
/*
 * A pinned gate whose slot is empty: the kernel clears a prog array when
 * its last pin or fd goes, and does it later, from a work queue, so a slot
 * refilled at once can be emptied again. Checked on every inspection.
 */
static void refill_pinned(const struct bpfgate *bg, uint64_t cgid, const char *dir,
			  const struct pinned *pins, size_t n_pins)
{
	for (size_t i = 0; i < n_pins; i++) {
		char path[PATH_MAX], name[32];
		uint32_t zero = 0, held = 0;
		auto_close int map_fd = -1, orig_fd = -1;

		if (pins[i].kind != PIN_GATE)
			continue;
		if (pins[i].shared) {
			refill_shared(bg, cgid, &pins[i]);
			continue;
		}
		snprintf(name, sizeof(name), "slot-%u", pins[i].orig_id);
		if (pin_path(path, sizeof(path), dir, name) < 0)
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

static int inspect(struct bpfgate *bg, uint64_t cgid, const char *dir, int cgfd,
		   struct pinned *pins, size_t *n_pins, struct attached *now)
{
	int r;

	find_pending(bg, cgid, false);
	r = read_pins(bg, cgid, dir, cgfd, pins, MAX_PROGS, n_pins);

	if (r == 0)
		refill_pinned(bg, cgid, dir, pins, *n_pins);
	if (r == 0)
		r = bpfgate_query(cgfd, false, now);
	if (r == 0)
		r = recover_pins(bg, cgid, dir, cgfd, pins, *n_pins, now);
	if (r > 0) /* something changed: look again */
		r = read_pins(bg, cgid, dir, cgfd, pins, MAX_PROGS, n_pins);
	if (r == 0)
		r = bpfgate_query(cgfd, false, now);
	return r;
}

int guard_apply(struct bpfgate *bg, uint64_t cgid, int cgfd, struct guard_info *info,
		struct dg_error *err)
{
	auto_cleanup(devgate_destroyp) struct devgate *tally_src = NULL;
	struct pinned pins[MAX_PROGS];
	struct attached now = { 0 };
	char dir[PATH_MAX];
	size_t n_pins = 0;
	struct guard_info gi = { 0 };
	int r;

	r = bpfgate_cg_dir(bg, cgid, dir, sizeof(dir));
	if (r < 0)
		return dg_error_set(err, DG_E_INTERNAL, r, "pin path too long");
	r = inspect(bg, cgid, dir, cgfd, pins, &n_pins, &now);
	if (r < 0)
		return dg_error_set(err, DG_E_KERNEL, r,
				    "cannot inspect the device programs of "
				    "cgroup %llu: %s",
				    (unsigned long long)cgid, strerror(-r));
	/* The common case: already gated, and no runtime program superseded. */
	if (settled(pins, n_pins, &now) && !replace_pending(bg, cgid) &&
	    !find_superseded(bg, cgid, pins, n_pins, &now, &(uint32_t){ 0 })) {
		guard_summary(cgfd, pins, n_pins, &gi);
		if (info)
			*info = gi;
		return 0;
	}
	/* A runtime that replaced or detached our programs leaves stale pins. */
	for (size_t i = 0; i < n_pins; i++) {
		if (!attached_has(&now, pins[i].id))
			unpin_one(dir, &pins[i]);
	}
	for (uint32_t i = 0; i < now.n; i++) {
		if (find_pinned(pins, n_pins, now.ids[i]))
			continue;
		r = wrap(bg, cgid, dir, cgfd, now.ids[i], now.flags, &tally_src, err);
		if (r < 0)
			return r;
		gi.wrapped++;
	}
	r = drop_superseded(bg, cgid, dir, cgfd, err);
	if (r < 0)
		return r;
	if (now.n == 0) {
		r = attach_default(bg, cgid, dir, cgfd, &tally_src, err);
		if (r < 0)
			return r;
	}
	r = read_pins(bg, cgid, dir, cgfd, pins, ARRAY_SIZE(pins), &n_pins);
	if (r == 0)
		r = place_tally(bg, cgid, dir, cgfd, pins, n_pins, &tally_src, err);
	if (r < 0)
		return r;
	r = read_pins(bg, cgid, dir, cgfd, pins, ARRAY_SIZE(pins), &n_pins);
	if (r == 0)
		guard_summary(cgfd, pins, n_pins, &gi);
	if (info)
		*info = gi;
	return 0;
}

static uint64_t digest_of(const struct attached *now)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */

	for (uint32_t i = 0; i < now->n; i++)
		h = (h ^ now->ids[i]) * 1099511628211ull;
	return ((h ^ now->flags) * 1099511628211ull) | 1; /* never 0 */
}

int guard_digest(int cgfd, uint64_t *ret)
{
	struct attached now = { 0 };
	int r = bpfgate_query(cgfd, false, &now);

	if (r < 0)
		return r;
	*ret = digest_of(&now);
	return 0;
}

int guard_needed(struct bpfgate *bg, uint64_t cgid, int cgfd, uint64_t *digest)
{
	struct pinned pins[MAX_PROGS];
	struct attached now = { 0 };
	char dir[PATH_MAX];
	size_t n_pins = 0;
	int r;

	r = bpfgate_cg_dir(bg, cgid, dir, sizeof(dir));
	if (r == 0)
		r = inspect(bg, cgid, dir, cgfd, pins, &n_pins, &now);
	if (r < 0)
		return r;
	if (digest)
		*digest = digest_of(&now);
	if (!settled(pins, n_pins, &now) || replace_pending(bg, cgid))
		return 1;
	return find_superseded(bg, cgid, pins, n_pins, &now, &(uint32_t){ 0 }) != NULL;
}

/* Puts runtime program orig back in place of its gate. */
static int restore(int cgfd, const struct pinned *p, uint32_t cg_flags)
{
	auto_close int orig_fd = -1, gate_fd = -1;
	bool multi = cg_flags & BPF_F_ALLOW_MULTI;

	gate_fd = bpf_prog_get_fd_by_id(p->id);
	if (gate_fd < 0)
		return -errno;
	/* The slot still holds orig, so it cannot have been freed. */
	orig_fd = bpf_prog_get_fd_by_id(p->orig_id);
	if (orig_fd < 0)
		return -errno;
	return attach(orig_fd, cgfd, multi ? BPF_F_ALLOW_MULTI : cg_flags, multi ? gate_fd : -1);
}

static int unguard_attached(int cgfd, const struct pinned *pins, size_t n_pins, uint64_t cgid,
			    struct dg_error *err)
{
	struct attached now = { 0 };
	int r = bpfgate_query(cgfd, false, &now);

	if (r < 0)
		return dg_error_set(err, DG_E_KERNEL, r,
				    "cannot query device programs of cgroup "
				    "%llu: %s",
				    (unsigned long long)cgid, strerror(-r));
	/* Runtime programs first, so the cgroup is never left unfiltered. */
	for (size_t i = 0; i < n_pins; i++) {
		if (pins[i].kind != PIN_GATE || !attached_has(&now, pins[i].id))
			continue;
		r = restore(cgfd, &pins[i], now.flags);
		if (r < 0)
			return dg_error_set(err, DG_E_KERNEL, r,
					    "cannot put device program %u back "
					    "on cgroup %llu: %s",
					    pins[i].orig_id, (unsigned long long)cgid,
					    strerror(-r));
	}
	for (size_t i = 0; i < n_pins; i++) {
		const char *name = pins[i].kind == PIN_TALLY ? "tally" : "gate-default";

		if (pins[i].kind == PIN_GATE || !attached_has(&now, pins[i].id))
			continue;
		r = detach_pinned(&pins[i], cgfd);
		if (r < 0)
			return dg_error_set(err, DG_E_KERNEL, r,
					    "cannot detach %s from cgroup "
					    "%llu: %s",
					    name, (unsigned long long)cgid, strerror(-r));
	}
	return 0;
}

int guard_remove(struct bpfgate *bg, uint64_t cgid, int cgfd, struct dg_error *err)
{
	struct pinned pins[MAX_PROGS];
	char dir[PATH_MAX];
	size_t n_pins = 0;
	auto_closedir DIR *d = NULL;
	struct dirent *de;
	int r;

	r = bpfgate_cg_dir(bg, cgid, dir, sizeof(dir));
	if (r == 0 && cgfd >= 0) {
		struct attached now = { 0 };

		/* Lost pins first: what is ours is found on the cgroup itself. */
		r = inspect(bg, cgid, dir, cgfd, pins, &n_pins, &now);
		/* Removed since it was opened (a container that just ended): nothing
		 * is attached any more, so only the pins go. */
		if (r == -ENOENT) {
			cgfd = -1;
			r = 0;
		}
	}
	if (r == 0 && cgfd < 0)
		r = read_pins(bg, cgid, dir, cgfd, pins, ARRAY_SIZE(pins), &n_pins);
	if (r < 0)
		return dg_error_set(err, DG_E_KERNEL, r, "cannot read pins of cgroup %llu: %s",
				    (unsigned long long)cgid, strerror(-r));
	if (cgfd >= 0) {
		r = unguard_attached(cgfd, pins, n_pins, cgid, err);
		if (r < 0)
			return r;
	}
	forget_replaces(bg, cgid);
	find_pending(bg, cgid, true);
	forget_owners(bg, cgid, 0);
	/* The runtime programs are back on their cgroup, or it is gone: let go. */
	for (size_t i = 0; i < n_pins; i++) {
		if (pins[i].kind == PIN_GATE)
			keeper_release(&bg->keeper, pins[i].orig_id);
	}
	onegate_forget(bg, cgid);
	d = opendir(dir);
	while (d && (de = readdir(d))) {
		if (de->d_name[0] != '.')
			unpin(dir, de->d_name);
	}
	if (d && rmdir(dir) < 0 && errno != ENOENT)
		log_warning_errno(errno, "cannot remove %s: %m", dir);
	return n_pins > 0 || d;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Sorted, each id once. */
static size_t unique_ids(uint64_t *ids, size_t n)
{
	size_t k = 0;

	qsort(ids, n, sizeof(*ids), cmp_u64);
	for (size_t i = 0; i < n; i++) {
		if (k == 0 || ids[k - 1] != ids[i])
			ids[k++] = ids[i];
	}
	return k;
}

int guard_list(struct bpfgate *bg, uint64_t **ret, size_t *ret_n)
{
	char path[PATH_MAX];
	auto_closedir DIR *d = NULL;
	auto_free uint64_t *ids = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;

	snprintf(path, sizeof(path), "%s/cg", bg->pin_root);
	d = opendir(path);
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		uint64_t id;

		if (parse_u64(de->d_name, &id) < 0)
			continue;
		if (ARRAY_GROW(ids, n, cap) < 0)
			return -ENOMEM;
		ids[n++] = id;
	}
	/* And every cgroup a shared program was attached to (its storage says so). */
	if (bg->tally_fd >= 0) {
		auto_free uint64_t *more = NULL;
		size_t m = 0;
		uint64_t *all;

		if (onegate_list(bg, &more, &m) == 0 && m) {
			all = realloc(ids, (n + m) * sizeof(*ids));
			if (!all)
				return -ENOMEM;
			ids = all;
			memcpy(ids + n, more, m * sizeof(*ids));
			n = unique_ids(ids, n + m);
		}
	}
	*ret = TAKE_PTR(ids);
	*ret_n = n;
	return 0;
}
