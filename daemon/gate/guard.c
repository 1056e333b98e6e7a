// SPDX-License-Identifier: Apache-2.0
/*
 * Guarding one cgroup: devgate's gate in place of each runtime program
 * (atomically, BPF_F_REPLACE), a default gate where there was none, the
 * tally last; and taking all of it off again, the runtime's programs put
 * back first. A shared gate where the cgroup allows it (onegate.c), else a
 * copy of its own pinned under PIN_ROOT/cg/CGID (pinned.c). Every wrapped
 * runtime program is also held by the keeper (keeper.c).
 *
 * Before it acts it looks: programs whose pins were lost are proven and
 * recovered first (own.c), and a gate whose runtime program the runtime
 * itself replaced is dropped (supersede.c judges that).
 *
 * It must not know leases, containers or struct daemon: a cgroup is an id
 * and an fd.
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
#include "cgprog.h"
#include "cleanup.h"
#include "sys/fault.h"
#include "gate_int.h"
#include "guard.h"
#include "log.h"
#include "onegate.h"
#include "own.h"
#include "pinned.h"
#include "supersede.h"
#include "unwrap.h"
#include "util.h"

/* The set whose shared gate is the default gate: BPF_CGROUP_DEVICE, like a copy's. */
#define DEFAULT_SET 1

/*
 * Lists devgate's programs on cgroup cgid into out: first the copies pinned
 * under dir, then the shared programs attached to cgfd.
 */
static int read_pins(const struct bpfgate *bg, uint64_t cgid, const char *dir, int cgfd,
		     struct pinned *out, size_t max, size_t *ret_n)
{
	int r = pinned_read_dir(dir, out, max, ret_n);

	return r < 0 ? r : onegate_read(bg, cgid, cgfd, out, max, ret_n);
}

/*
 * Finds a copy whose gate holds runtime program orig_fd in its slot: the
 * spare if it fits, else a fresh load. The prog array takes orig only if
 * the gate has orig's expected_attach_type: runc, crun and LXC load with 0
 * (as the spare is), libbpf-based loaders with BPF_CGROUP_DEVICE.
 */
static int copy_for_wrap(struct bpfgate *bg, int orig_fd, struct devgate **ret)
{
	static const enum bpf_attach_type eats[] = { 0, BPF_CGROUP_DEVICE };
	int r = -EINVAL;

	if (bg->spare) {
		r = gateobj_set_slot(bg->spare, orig_fd);
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
		r = gateobj_load_copy(bg->pin_root, bg->maps, true, eats[i], &skel);
		if (r < 0)
			return r;
		r = gateobj_set_slot(skel, orig_fd);
		if (r == 0) {
			*ret = TAKE_PTR(skel);
			return 0;
		}
		if (r != -EINVAL)
			return r;
	}
	return r;
}

/* Keeps the first copy loaded for a cgroup, whose tally place_tally() may attach next. */
static void keep_for_tally(struct devgate **skel, struct devgate **tally_src)
{
	if (!*tally_src)
		*tally_src = TAKE_PTR(*skel);
}

/* Writes cgid into its cgroup's storage, which exists once a shared program is attached. */
static int name_cgroup(const struct bpfgate *bg, uint64_t cgid)
{
	struct dg_cgstate st;

	if (onegate_state_get(bg, cgid, &st) == 0 && st.cgroup_id == cgid)
		return 0;
	st.cgroup_id = cgid;
	return onegate_state_put(bg, cgid, &st);
}

/* Attaches the shared tally to cgfd, last, and names the cgroup for it. */
static int attach_shared_tally(struct bpfgate *bg, uint64_t cgid, int cgfd, struct dg_error *err)
{
	int r = cgprog_attach(bg->tally_fd, cgfd, BPF_F_ALLOW_MULTI, -1);

	if (r == 0)
		r = name_cgroup(bg, cgid);
	if (r < 0)
		return dg_error_set(err, DG_E_KERNEL, r, "cannot attach devgate's tally: %s",
				    strerror(-r));
	return 0;
}

/*
 * Puts the shared gate in place of runtime program orig: a slot for orig,
 * the cgroup's storage pointed at it, then one BPF_F_REPLACE attach. The
 * tally goes first where it is missing, because attaching it makes the
 * cgroup's storage and the gate must find its slot from its first run.
 * Returns 1 when done, 0 when this cgroup needs a copy instead (it has no
 * multi-program mode, or the set's gate already stands in for another
 * program here), or -errno.
 */
static int wrap_shared(struct bpfgate *bg, uint64_t cgid, int cgfd, int orig_fd, uint32_t orig_id,
		       struct dg_error *err)
{
	struct attached now = { 0 };
	uint32_t set = 0, slot = 0;
	int r;

	if (bg->tally_fd < 0)
		return 0;
	r = cgprog_query(cgfd, false, &now);
	if (r < 0 || !(now.flags & BPF_F_ALLOW_MULTI))
		return 0;
	r = onegate_slot_take(bg, cgid, orig_fd, &set, &slot);
	if (r == -EINVAL || r == -ENOSPC)
		return 0;
	if (r == 0 && cgprog_has(&now, bg->gate_id[set])) {
		onegate_slot_drop(bg, set, slot);
		return 0;
	}
	if (r == 0 && !cgprog_has(&now, bg->tally_id))
		r = cgprog_attach(bg->tally_fd, cgfd, BPF_F_ALLOW_MULTI, -1);
	if (r == 0)
		r = onegate_state_point(bg, cgid, set, slot, orig_id);
	if (r == 0)
		r = cgprog_attach(bg->gate_fd[set], cgfd, BPF_F_ALLOW_MULTI, orig_fd);
	if (r < 0) {
		if (slot) {
			(void)onegate_state_point(bg, cgid, set, 0, 0);
			onegate_slot_drop(bg, set, slot);
		}
		return dg_error_set(err, DG_E_KERNEL, r,
				    "cannot put devgate's gate in place of device program %u: %s",
				    orig_id, strerror(-r));
	}
	return 1;
}

/* What every wrap does last: has the keeper hold orig, and notes who keeps it open. */
static void wrapped(struct bpfgate *bg, uint64_t cgid, int cgfd, int orig_fd, uint32_t orig_id)
{
	/* A slot empties with its map's last pin: the kernel keeps orig for us here. */
	int r = keeper_hold(&bg->keeper, orig_fd, orig_id);

	if (r < 0)
		log_warning_errno(
			r, "cannot keep device program %u: %m (it lives as long as its slot)",
			orig_id);
	supersede_note_owner(bg->sup, cgid, cgfd, orig_id);
	log_debug("cgroup %llu: gate in place of device program %u", (unsigned long long)cgid,
		  orig_id);
}

/*
 * Replaces runtime program orig_id on cgfd by a gate, atomically: the
 * shared gate where it can, else a copy pinned under dir. A copy loaded
 * here is handed to *tally_src for place_tally().
 */
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
		r = gateobj_set_self(skel, cgid, orig_id);
	if (r < 0 || !skel)
		return dg_error_set(err, DG_E_KERNEL, r < 0 ? r : -EIO,
				    "cannot load a gate for device program %u: %s", orig_id,
				    strerror(-r));
	snprintf(gate_name, sizeof(gate_name), "gate-%u", orig_id);
	snprintf(slot_name, sizeof(slot_name), "slot-%u", orig_id);
	r = pinned_pin(bpf_map__fd(skel->maps.runtime_prog), dir, slot_name);
	if (r == 0)
		r = pinned_pin(bpf_program__fd(skel->progs.devgate_gate), dir, gate_name);
	if (r == 0)
		r = cgprog_attach(bpf_program__fd(skel->progs.devgate_gate), cgfd,
				  multi ? BPF_F_ALLOW_MULTI : cg_flags, multi ? orig_fd : -1);
	if (r < 0) {
		pinned_unpin_name(dir, gate_name);
		pinned_unpin_name(dir, slot_name);
		return dg_error_set(err, DG_E_KERNEL, r,
				    "cannot put a gate in place of device program %u: %s", orig_id,
				    strerror(-r));
	}
	wrapped(bg, cgid, cgfd, orig_fd, orig_id);
	keep_for_tally(&skel, tally_src);
	return 0;
}

/* Pins a copy's program as DIR/NAME and attaches it last on cgfd. */
static int attach_last(int prog_fd, const char *dir, int cgfd, const char *name,
		       struct dg_error *err)
{
	int r = pinned_pin(prog_fd, dir, name);

	if (r == 0)
		r = cgprog_attach(prog_fd, cgfd, BPF_F_ALLOW_MULTI, -1);
	if (r < 0) {
		pinned_unpin_name(dir, name);
		return dg_error_set(err, DG_E_KERNEL, r, "cannot attach devgate's %s program: %s",
				    name, strerror(-r));
	}
	return 0;
}

/* Gives a cgroup with no device program the gate with the default policy. */
static int attach_default(struct bpfgate *bg, uint64_t cgid, const char *dir, int cgfd,
			  struct devgate **tally_src, struct dg_error *err)
{
	auto_cleanup(devgate_destroyp) struct devgate *skel = NULL;
	struct dg_cgstate st;
	int r;

	if (bg->gate_fd[DEFAULT_SET] >= 0) {
		/* A storage left from before must not point the new gate at a slot. */
		if (onegate_state_get(bg, cgid, &st) == 0 && st.slot[DEFAULT_SET])
			(void)onegate_state_point(bg, cgid, DEFAULT_SET, 0, 0);
		r = cgprog_attach(bg->gate_fd[DEFAULT_SET], cgfd, BPF_F_ALLOW_MULTI, -1);
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
	r = gateobj_load_copy(bg->pin_root, bg->maps, false, BPF_CGROUP_DEVICE, &skel);
	if (r == 0)
		r = gateobj_set_self(skel, cgid, 0);
	if (r < 0 || !skel)
		return dg_error_set(err, DG_E_KERNEL, r < 0 ? r : -EIO,
				    "cannot load devgate's default gate: %s", strerror(-r));
	r = attach_last(bpf_program__fd(skel->progs.devgate_gate), dir, cgfd, "gate-default", err);
	if (r == 0)
		keep_for_tally(&skel, tally_src);
	return r;
}

/*
 * Attaches the tally last on cgfd, or moves it back there: it must run
 * after every gate to see their verdict. A cgroup without multi-program
 * mode has room for no tally.
 */
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
	r = cgprog_query(cgfd, false, &now);
	if (r < 0)
		return dg_error_set(err, DG_E_KERNEL, r, "cannot query device programs: %s",
				    strerror(-r));
	if (!(now.flags & BPF_F_ALLOW_MULTI))
		return 0; /* single-program cgroup: no room for a tally */
	if (tally && now.n && cgprog_has(&now, tally->id)) {
		auto_close int fd = -1;

		if (now.ids[now.n - 1] == tally->id)
			return 0;
		/* A program attached after it: move the tally back to the end. */
		r = cgprog_detach(tally->id, cgfd);
		if (r == 0)
			fd = bpf_prog_get_fd_by_id(tally->id);
		if (r == 0 && fd < 0)
			r = -errno;
		if (r == 0)
			r = cgprog_attach(fd, cgfd, BPF_F_ALLOW_MULTI, -1);
		if (r < 0)
			return dg_error_set(err, DG_E_KERNEL, r, "cannot move the tally: %s",
					    strerror(-r));
		return 0;
	}
	if (bg->tally_fd >= 0)
		return attach_shared_tally(bg, cgid, cgfd, err);
	if (!*tally_src) {
		r = gateobj_load_copy(bg->pin_root, bg->maps, true, 0, tally_src);
		if (r == 0 && *tally_src)
			r = gateobj_set_self(*tally_src, cgid, 0);
		if (r < 0 || !*tally_src)
			return dg_error_set(err, DG_E_KERNEL, r < 0 ? r : -EIO,
					    "cannot load devgate's tally: %s", strerror(-r));
	}
	return attach_last(bpf_program__fd((*tally_src)->progs.devgate_tally), dir, cgfd, "tally",
			   err);
}

/* Detaches the gate standing in for runtime program old, and lets old go. */
static int drop_gate(struct bpfgate *bg, uint64_t cgid, const char *dir, int cgfd,
		     const struct pinned *old, uint32_t new_id, struct dg_error *err)
{
	int r = cgprog_detach(old->id, cgfd);

	if (r < 0)
		return dg_error_set(err, DG_E_KERNEL, r,
				    "cannot detach the gate for device program %u: %s",
				    old->orig_id, strerror(-r));
	pinned_unpin(dir, old);
	onegate_release(bg, cgid, old);
	keeper_release(&bg->keeper, old->orig_id);
	supersede_gone(bg->sup, cgid, old->orig_id);
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
			r = cgprog_query(cgfd, false, &now);
		if (r < 0)
			return dg_error_set(err, DG_E_KERNEL, r, "cannot inspect cgroup %llu: %s",
					    (unsigned long long)cgid, strerror(-r));
		old = supersede_find(bg->sup, cgid, pins, n_pins, &now, &new_id);
		if (!old)
			break;
		r = drop_gate(bg, cgid, dir, cgfd, old, new_id, err);
		if (r < 0)
			return r;
	}
	supersede_prune(bg->sup, cgid, pins, n_pins, &now);
	return 0;
}

/* Where program id is in now, or -1. */
static int position(const struct attached *now, uint32_t id)
{
	for (uint32_t i = 0; i < now->n; i++) {
		if (now->ids[i] == id)
			return (int)i;
	}
	return -1;
}

static const struct pinned *find_kind(const struct pinned *pins, size_t n_pins, enum pin_kind kind)
{
	for (size_t i = 0; i < n_pins; i++) {
		if (pins[i].kind == kind)
			return &pins[i];
	}
	return NULL;
}

/*
 * Whether cgfd is to be guarded by the beside gate: gate-mode is beside,
 * the cgroup takes several programs and has a runtime's (bare, or behind a
 * gate of the replace form, which is then converted), and it is guarded so
 * already or no ancestor's program runs before its own (one attached with
 * BPF_F_PREORDER: the beside gate would clear its denial).
 */
static bool beside_wanted(const struct bpfgate *bg, int cgfd, const struct pinned *pins,
			  size_t n_pins, const struct attached *now)
{
	struct attached eff = { 0 };
	bool foreign = false;

	for (uint32_t i = 0; i < now->n; i++)
		foreign |= !pinned_find(pins, n_pins, now->ids[i]);
	/* A runtime's program behind a gate of the replace form counts too: converted. */
	foreign |= unwrap_any(pins, n_pins, now);
	if (!bg->beside_on || !foreign || bg->beside_fd[BESIDE_A] < 0 ||
	    bg->beside_fd[BESIDE_B] < 0 || (bg->need_mark && bg->mark_fd < 0) || bg->tally_fd < 0 ||
	    !(now->flags & BPF_F_ALLOW_MULTI))
		return false;
	if (find_kind(pins, n_pins, PIN_BESIDE))
		return true;
	if (find_kind(pins, n_pins, PIN_DEFAULT))
		return false;
	return cgprog_query(cgfd, true, &eff) == 0 && eff.n > 0 && cgprog_has(now, eff.ids[0]);
}

/*
 * Whether there is nothing to do: all of ours are attached, the tally is
 * last, and every program on the cgroup is ours; or, beside the runtime's
 * programs, every program not ours runs before the beside gate (and there
 * is one: without it the default gate is due), and its lookout is there.
 */
static bool settled(const struct bpfgate *bg, int cgfd, const struct pinned *pins, size_t n_pins,
		    const struct attached *now)
{
	const struct pinned *tally = find_kind(pins, n_pins, PIN_TALLY);
	const struct pinned *beside = find_kind(pins, n_pins, PIN_BESIDE);
	int at = beside ? position(now, beside->id) : -1;
	bool foreign = false;

	if (now->n == 0)
		return false;
	/* The other form than gate-mode's, where it can change: converted. */
	if (!bg->beside_on && beside)
		return false;
	if (bg->beside_on && unwrap_any(pins, n_pins, now) &&
	    beside_wanted(bg, cgfd, pins, n_pins, now))
		return false;
	for (uint32_t i = 0; i < now->n; i++) {
		if (pinned_find(pins, n_pins, now->ids[i]))
			continue;
		if (at < 0 || (int)i > at)
			return false;
		foreign = true;
	}
	if (beside && (!foreign || (bg->need_mark && !find_kind(pins, n_pins, PIN_MARK))))
		return false;
	for (size_t i = 0; i < n_pins; i++) {
		if (!cgprog_has(now, pins[i].id))
			return false;
	}
	if (!(now->flags & BPF_F_ALLOW_MULTI))
		return true;
	return tally && now->ids[now->n - 1] == tally->id;
}

/* Counts the gates and the tally in pins, and the device programs of the ancestors. */
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
	if (cgprog_query(cgfd, false, &now) == 0 && cgprog_query(cgfd, true, &eff) == 0) {
		gi->ancestor_progs = eff.n > now.n ? eff.n - now.n : 0;
		gi->effective = cgprog_digest(&eff);
	}
}

/*
 * Reads devgate's programs on the cgroup into pins and what is attached
 * into now, after repairing what lost pins broke. Owners noted for this
 * cgroup are looked for first: supersede_find() may need them.
 */
static int inspect(struct bpfgate *bg, uint64_t cgid, const char *dir, int cgfd,
		   struct pinned *pins, size_t *n_pins, struct attached *now)
{
	int r;

	supersede_look(bg->sup, cgid);
	r = read_pins(bg, cgid, dir, cgfd, pins, MAX_PROGS, n_pins);

	if (r == 0)
		own_refill(bg, cgid, dir, pins, *n_pins);
	if (r == 0)
		r = cgprog_query(cgfd, false, now);
	if (r == 0)
		r = own_recover(bg, cgid, dir, cgfd, pins, *n_pins, now);
	if (r > 0) /* something changed: look again */
		r = read_pins(bg, cgid, dir, cgfd, pins, MAX_PROGS, n_pins);
	if (r == 0)
		r = cgprog_query(cgfd, false, now);
	return r;
}

/* What every guard does last: the tally placed, and what is on the cgroup told. */
static int finish(struct bpfgate *bg, uint64_t cgid, const char *dir, int cgfd,
		  struct devgate **tally_src, struct guard_info *gi, struct guard_info *info,
		  struct dg_error *err)
{
	struct pinned pins[MAX_PROGS];
	size_t n_pins = 0;
	int r = read_pins(bg, cgid, dir, cgfd, pins, ARRAY_SIZE(pins), &n_pins);

	if (r == 0)
		r = place_tally(bg, cgid, dir, cgfd, pins, n_pins, tally_src, err);
	if (r < 0)
		return r;
	r = read_pins(bg, cgid, dir, cgfd, pins, ARRAY_SIZE(pins), &n_pins);
	if (r == 0)
		guard_summary(cgfd, pins, n_pins, gi);
	if (info)
		*info = *gi;
	return 0;
}

/* The instance of the beside gate that decides on cgfd (the last attached), or -1; at: where. */
static int beside_current(const struct bpfgate *bg, const struct attached *now, int *at)
{
	int k = -1;

	*at = -1;
	for (int i = BESIDE_A; i <= BESIDE_B; i++) {
		int p = position(now, bg->beside_id[i]);

		if (p > *at) {
			*at = p;
			k = i;
		}
	}
	return k;
}

/*
 * Puts the beside gate after every program on cgfd that is not ours, its
 * lookout first. A move attaches the other instance last before the one
 * in place comes off, so a granted device is never denied on the way.
 * Its storage is named before the tally is placed, so that it finds its
 * grants from the tally's first run.
 */
static int place_beside(struct bpfgate *bg, uint64_t cgid, int cgfd, const struct pinned *pins,
			size_t n_pins, struct dg_error *err)
{
	struct attached now = { 0 };
	int r = cgprog_query(cgfd, false, &now), at, k;
	bool behind = false;

	if (r < 0)
		return dg_error_set(err, DG_E_KERNEL, r, "cannot query device programs: %s",
				    strerror(-r));
	/* No beside gate without its lookout: it would clear an ancestor's denial. */
	if (bg->need_mark && !cgprog_has(&now, bg->mark_id))
		r = cgprog_attach(bg->mark_fd, cgfd, BPF_F_ALLOW_MULTI | BPF_F_PREORDER, -1);
	k = beside_current(bg, &now, &at);
	for (uint32_t i = (uint32_t)(at + 1); i < now.n; i++)
		behind |= !pinned_find(pins, n_pins, now.ids[i]);
	if (r == 0 && (k < 0 || behind))
		r = cgprog_attach(bg->beside_fd[k == BESIDE_A], cgfd, BPF_F_ALLOW_MULTI, -1);
	/* The one before, and one a crash left beside it. */
	for (int i = BESIDE_A; i <= BESIDE_B && r == 0; i++) {
		if (cgprog_has(&now, bg->beside_id[i]) && (i != k || behind))
			r = cgprog_detach(bg->beside_id[i], cgfd);
	}
	if (r == 0)
		r = name_cgroup(bg, cgid);
	if (r < 0)
		return dg_error_set(err, DG_E_KERNEL, r, "cannot attach devgate's beside gate: %s",
				    strerror(-r));
	return 0;
}

/*
 * Guards cgfd with the beside gate: the runtime's programs stay where they
 * are, so the runtime can still replace or detach them; the gate after
 * them, the tally last.
 */
static int guard_beside(struct bpfgate *bg, uint64_t cgid, const char *dir, int cgfd,
			struct guard_info *info, struct dg_error *err)
{
	auto_cleanup(devgate_destroyp) struct devgate *tally_src = NULL;
	struct pinned pins[MAX_PROGS];
	size_t n_pins = 0;
	struct guard_info gi = { 0 };
	int r = read_pins(bg, cgid, dir, cgfd, pins, ARRAY_SIZE(pins), &n_pins);

	if (r < 0)
		return dg_error_set(err, DG_E_KERNEL, r, "cannot read pins of cgroup %llu: %s",
				    (unsigned long long)cgid, strerror(-r));
	r = place_beside(bg, cgid, cgfd, pins, n_pins, err);
	/* From the replace form: the runtime's programs back once the beside gate is last. */
	if (r == 0)
		r = unwrap_gates(bg, cgid, dir, cgfd, pins, n_pins, err);
	return r < 0 ? r : finish(bg, cgid, dir, cgfd, &tally_src, &gi, info, err);
}

/* The beside gate off cgfd: both instances (a crash may leave two), then the lookout they read. */
static int beside_off(const struct bpfgate *bg, int cgfd, struct dg_error *err)
{
	int r = 0;

	for (int k = BESIDE_A; k <= BESIDE_B && r == 0; k++)
		r = bg->beside_id[k] ? cgprog_detach(bg->beside_id[k], cgfd) : 0;
	if (r == 0 && bg->mark_id)
		r = cgprog_detach(bg->mark_id, cgfd);
	if (r < 0)
		return dg_error_set(err, DG_E_KERNEL, r, "cannot detach the beside gate: %s",
				    strerror(-r));
	return 0;
}

/*
 * The runtime took its last program off a cgroup the beside gate guards:
 * the default gate goes on before the beside gate comes off, so a granted
 * device stays open and the others fall under the default policy.
 */
static int beside_to_default(struct bpfgate *bg, uint64_t cgid, const char *dir, int cgfd,
			     struct devgate **tally_src, struct dg_error *err)
{
	int r = attach_default(bg, cgid, dir, cgfd, tally_src, err);

	return r < 0 ? r : beside_off(bg, cgfd, err);
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
	bool beside, runtime;
	int r;

	r = pinned_dir(bg->pin_root, cgid, dir, sizeof(dir));
	if (r < 0)
		return dg_error_set(err, DG_E_INTERNAL, r, "pin path too long");
	r = inspect(bg, cgid, dir, cgfd, pins, &n_pins, &now);
	if (r < 0)
		return dg_error_set(err, DG_E_KERNEL, r,
				    "cannot inspect the device programs of "
				    "cgroup %llu: %s",
				    (unsigned long long)cgid, strerror(-r));
	/* The common case: already gated, and no runtime program superseded. */
	if (settled(bg, cgfd, pins, n_pins, &now) && !supersede_pending(bg->sup, cgid) &&
	    !supersede_find(bg->sup, cgid, pins, n_pins, &now, &(uint32_t){ 0 })) {
		guard_summary(cgfd, pins, n_pins, &gi);
		gi.settled = cgprog_digest(&now); /* the very list judged settled */
		if (info)
			*info = gi;
		return 0;
	}
	/* A runtime that replaced or detached our programs leaves stale pins. */
	for (size_t i = 0; i < n_pins; i++) {
		if (!cgprog_has(&now, pins[i].id))
			pinned_unpin(dir, &pins[i]);
	}
	if (beside_wanted(bg, cgfd, pins, n_pins, &now))
		return guard_beside(bg, cgid, dir, cgfd, info, err);
	beside = find_kind(pins, n_pins, PIN_BESIDE) != NULL;
	runtime = unwrap_any(pins, n_pins, &now);
	for (uint32_t i = 0; i < now.n; i++)
		runtime |= !pinned_find(pins, n_pins, now.ids[i]);
	if (beside && !runtime) {
		r = beside_to_default(bg, cgid, dir, cgfd, &tally_src, err);
		if (r < 0)
			return r;
	}
	for (uint32_t i = 0; i < now.n; i++) {
		if (pinned_find(pins, n_pins, now.ids[i]))
			continue;
		r = wrap(bg, cgid, dir, cgfd, now.ids[i], now.flags, &tally_src, err);
		if (r < 0)
			return r;
		gi.wrapped++;
	}
	/* To the replace form: the beside gate off once every program is wrapped. */
	if (beside && runtime) {
		fault_point("guard.unconvert");
		r = beside_off(bg, cgfd, err);
		if (r < 0)
			return r;
	}
	r = drop_superseded(bg, cgid, dir, cgfd, err);
	if (r < 0)
		return r;
	if (now.n == 0) {
		r = attach_default(bg, cgid, dir, cgfd, &tally_src, err);
		if (r < 0)
			return r;
	}
	return finish(bg, cgid, dir, cgfd, &tally_src, &gi, info, err);
}

/*
 * The digest is the heal check's: equal ids (never reused while the
 * system runs) and flags are the very programs once found settled. A
 * runtime's replace on record (LXC) or an owner still to judge can make
 * settled ones superseded without an attach, so those take the full check.
 */
int guard_ensure(struct bpfgate *bg, uint64_t cgid, int cgfd, uint64_t known,
		 struct guard_info *info, struct dg_error *err)
{
	struct attached now = { 0 }, eff = { 0 };

	if (!known || supersede_tracks(bg->sup, cgid) || cgprog_query(cgfd, false, &now) < 0 ||
	    cgprog_digest(&now) != known || cgprog_query(cgfd, true, &eff) < 0)
		return guard_apply(bg, cgid, cgfd, info, err);
	if (info)
		*info = (struct guard_info){
			.ancestor_progs = eff.n > now.n ? eff.n - now.n : 0,
			.settled = known,
			.effective = cgprog_digest(&eff),
		};
	return 0;
}

int guard_digest(int cgfd, uint64_t *ret)
{
	return cgprog_digest_of(cgfd, false, ret);
}

int guard_needed(struct bpfgate *bg, uint64_t cgid, int cgfd, uint64_t *digest)
{
	struct pinned pins[MAX_PROGS];
	struct attached now = { 0 };
	char dir[PATH_MAX];
	size_t n_pins = 0;
	int r;

	r = pinned_dir(bg->pin_root, cgid, dir, sizeof(dir));
	if (r == 0)
		r = inspect(bg, cgid, dir, cgfd, pins, &n_pins, &now);
	if (r < 0)
		return r;
	if (digest)
		*digest = cgprog_digest(&now);
	if (!settled(bg, cgfd, pins, n_pins, &now) || supersede_pending(bg->sup, cgid))
		return 1;
	return supersede_find(bg->sup, cgid, pins, n_pins, &now, &(uint32_t){ 0 }) != NULL;
}

/* Detaches what of ours in pins is attached (now), gates standing in for runtime programs aside:
 * the lookout alone, or all but it. */
static int detach_ours(int cgfd, const struct pinned *pins, size_t n_pins,
		       const struct attached *now, bool mark, uint64_t cgid, struct dg_error *err)
{
	for (size_t i = 0; i < n_pins; i++) {
		const char *name = pins[i].kind == PIN_TALLY	? "tally"
				   : pins[i].kind == PIN_BESIDE ? "beside gate"
				   : pins[i].kind == PIN_MARK	? "lookout"
								: "gate-default";
		int r;

		if (pins[i].kind == PIN_GATE || (pins[i].kind == PIN_MARK) != mark ||
		    !cgprog_has(now, pins[i].id))
			continue;
		r = cgprog_detach(pins[i].id, cgfd);
		if (r < 0)
			return dg_error_set(err, DG_E_KERNEL, r,
					    "cannot detach %s from cgroup "
					    "%llu: %s",
					    name, (unsigned long long)cgid, strerror(-r));
	}
	return 0;
}

/*
 * Takes devgate's programs in pins off cgfd: runtime programs back in their
 * gates' places first, so the cgroup is never left unfiltered; then the
 * default gate and the tally.
 */
static int unguard_attached(int cgfd, const struct pinned *pins, size_t n_pins, uint64_t cgid,
			    struct dg_error *err)
{
	struct attached now = { 0 };
	int r = cgprog_query(cgfd, false, &now);

	if (r < 0)
		return dg_error_set(err, DG_E_KERNEL, r,
				    "cannot query device programs of cgroup "
				    "%llu: %s",
				    (unsigned long long)cgid, strerror(-r));
	/* Runtime programs first, so the cgroup is never left unfiltered. */
	for (size_t i = 0; i < n_pins; i++) {
		if (pins[i].kind != PIN_GATE || !cgprog_has(&now, pins[i].id))
			continue;
		r = unwrap_restore(cgfd, &pins[i], now.flags);
		if (r < 0)
			return dg_error_set(err, DG_E_KERNEL, r,
					    "cannot put device program %u back "
					    "on cgroup %llu: %s",
					    pins[i].orig_id, (unsigned long long)cgid,
					    strerror(-r));
	}
	/* The lookout last: a beside gate must not outlive it. */
	r = detach_ours(cgfd, pins, n_pins, &now, false, cgid, err);
	return r < 0 ? r : detach_ours(cgfd, pins, n_pins, &now, true, cgid, err);
}

int guard_remove(struct bpfgate *bg, uint64_t cgid, int cgfd, struct dg_error *err)
{
	struct pinned pins[MAX_PROGS];
	char dir[PATH_MAX];
	size_t n_pins = 0;
	auto_closedir DIR *d = NULL;
	struct dirent *de;
	int r;

	r = pinned_dir(bg->pin_root, cgid, dir, sizeof(dir));
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
	supersede_forget(bg->sup, cgid);
	/* The runtime programs are back on their cgroup, or it is gone: let go. */
	for (size_t i = 0; i < n_pins; i++) {
		if (pins[i].kind == PIN_GATE)
			keeper_release(&bg->keeper, pins[i].orig_id);
	}
	onegate_forget(bg, cgid);
	d = opendir(dir);
	while (d && (de = readdir(d))) {
		if (de->d_name[0] != '.')
			pinned_unpin_name(dir, de->d_name);
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

/* Sorts ids and keeps each once; returns how many are left. */
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

void guard_idle(struct bpfgate *bg)
{
	supersede_look(bg->sup, 0);
}

void guard_note_replace(struct bpfgate *bg, uint64_t cgid, uint32_t old_id, uint32_t new_id)
{
	supersede_note_replace(bg->sup, cgid, old_id, new_id);
}

void guard_init(struct bpfgate *bg, const int *leased_cgfds, size_t n_leased, bool beside)
{
	int r = supersede_new(&bg->sup);

	/* See ARCHITECTURE.md, "The runtime's own updates". */
	bg->beside_on = beside;

	/* Without it a runtime's replaced program is never proven replaced: its gate stays. */
	if (r < 0)
		log_warning_errno(r, "cannot keep a record of replaced device programs: %m");
	r = onegate_open(bg, leased_cgfds, n_leased);
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
	supersede_free(bg->sup);
	bg->sup = NULL;
	/* Kept while devgated runs: made again for every first grant, they cost more than they
	 * hold. */
	keeper_tidy(&bg->keeper);
}
