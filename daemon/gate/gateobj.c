// SPDX-License-Identifier: Apache-2.0
/*
 * devgate's BPF object through its skeleton. One object file, loaded in
 * three roles: the copy that owns the shared maps (no program), a copy for
 * one cgroup (a gate and a tally of its own), and the shared programs
 * (onegate.c). Every copy but the first reuses the first copy's maps, so
 * all of them see the same grants, counters and events.
 *
 * It only loads: it attaches nothing, pins only what libbpf pins by name,
 * and knows nothing of cgroups or of struct bpfgate.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "cleanup.h"
#include "gateobj.h"
#include "util.h"

/*
 * 0, or a compile-time error when string s does not fit BPF_OBJ_NAME_LEN
 * (15 characters and the NUL): the kernel keeps no more of a map's name,
 * and adopt.c finds maps by the name the kernel kept.
 */
#define NAME_FITS(s)                                                   \
	(0 * sizeof(struct {                                           \
		 _Static_assert(sizeof(s) <= BPF_OBJ_NAME_LEN,         \
				s " is longer than the kernel keeps"); \
		 int ok;                                               \
	 }))
/* A map's name, "dg_grants_v1" for dg_grants, checked by NAME_FITS. */
#define CHECKED_NAME(base) (&(DG_VNAME(base))[NAME_FITS(DG_VNAME(base))])

const struct shared_map_name gateobj_names[SHARED_MAPS] = {
	[MAP_GRANTS] = { .name = CHECKED_NAME(dg_grants) },
	[MAP_COUNTERS] = { .name = CHECKED_NAME(dg_counters) },
	[MAP_EVENTS] = { .name = CHECKED_NAME(dg_events) },
	[MAP_RATELIM] = { .name = CHECKED_NAME(dg_ratelim) },
	/* Its first name, 17 characters, reached the kernel as "dg_event_drops_". */
	[MAP_DROPS] = { .name = CHECKED_NAME(dg_evdrops), .was = "dg_event_drops" DG_VSUFFIX },
	[MAP_DEVGRANTS] = { .name = CHECKED_NAME(dg_devgrants) },
	[MAP_CGSTATE] = { .name = CHECKED_NAME(dg_cgstate) },
	[MAP_GUARDED] = { .name = CHECKED_NAME(dg_guarded) },
	[MAP_KNOWN] = { .name = CHECKED_NAME(dg_known) },
	[MAP_MARK] = { .name = CHECKED_NAME(dg_mark) },
	[MAP_TMARK] = { .name = CHECKED_NAME(dg_tmark) },
};

void gateobj_maps(const struct devgate *skel, struct bpf_map *ret[SHARED_MAPS])
{
	ret[MAP_GRANTS] = skel->maps.DG_V(dg_grants);
	ret[MAP_COUNTERS] = skel->maps.DG_V(dg_counters);
	ret[MAP_EVENTS] = skel->maps.DG_V(dg_events);
	ret[MAP_RATELIM] = skel->maps.DG_V(dg_ratelim);
	ret[MAP_DROPS] = skel->maps.DG_V(dg_evdrops);
	ret[MAP_DEVGRANTS] = skel->maps.DG_V(dg_devgrants);
	ret[MAP_CGSTATE] = skel->maps.DG_V(dg_cgstate);
	ret[MAP_GUARDED] = skel->maps.DG_V(dg_guarded);
	ret[MAP_KNOWN] = skel->maps.DG_V(dg_known);
	ret[MAP_MARK] = skel->maps.DG_V(dg_mark);
	ret[MAP_TMARK] = skel->maps.DG_V(dg_tmark);
}

/*
 * The tally's budget of denial events per cgroup and window: DG_CGROUP_EVENTS,
 * or DEVGATE_TEST_CGROUP_EVENTS (0: no limit) for the tests that must fill
 * the event ring from one container.
 */
static uint32_t cgroup_events(void)
{
	const char *v = getenv("DEVGATE_TEST_CGROUP_EVENTS");
	uint32_t n;

	return v && parse_u32(v, &n) == 0 ? n : DG_CGROUP_EVENTS;
}

const char *gateobj_proof_comm(void)
{
	static const char digits[] = "abcdefghijklmnopqrstuvwxyz0123456789";
	static union {
		char comm[16];
		uint64_t q[2];
	} tag;
	unsigned char rnd[12];

	if (tag.comm[0])
		return tag.comm;
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		return NULL; /* no prober tag: its opens are counted */
	memcpy(tag.comm, "dgp", 3);
	for (size_t i = 0; i < sizeof(rnd); i++)
		tag.comm[3 + i] = digits[rnd[i] % (sizeof(digits) - 1)];
	return tag.comm;
}

/* Gives skel's programs the prober's tag (see proof_comm in devgate.bpf.c). */
static void set_proof_comm(struct devgate *skel)
{
	const char *tag = gateobj_proof_comm();

	if (tag)
		memcpy((void *)skel->rodata->proof_comm, tag, sizeof(skel->rodata->proof_comm));
}

/*
 * Makes skel use the shared maps of from instead of creating or pinning its
 * own. Returns 0 or -errno.
 */
static int reuse_shared(struct devgate *skel, const struct devgate *from)
{
	struct bpf_map *to[SHARED_MAPS], *src[SHARED_MAPS];
	int r = 0;

	gateobj_maps(skel, to);
	gateobj_maps(from, src);
	for (size_t i = 0; i < SHARED_MAPS && r == 0; i++) {
		r = bpf_map__set_pin_path(to[i], NULL);
		if (r == 0)
			r = bpf_map__reuse_fd(to[i], bpf_map__fd(src[i]));
	}
	return r;
}

/* Makes skel use the maps in fds (by enum shared_map) where an fd is not -1. */
static int adopt_shared(struct devgate *skel, const int *fds)
{
	struct bpf_map *maps[SHARED_MAPS];
	int r = 0;

	gateobj_maps(skel, maps);
	for (size_t i = 0; i < SHARED_MAPS && r == 0; i++) {
		if (fds[i] >= 0)
			r = bpf_map__reuse_fd(maps[i], fds[i]);
	}
	return r;
}

/* Opens the object; maps pinned by name are looked for under pin_root. */
static int open_object(const char *pin_root, struct devgate **ret)
{
	LIBBPF_OPTS(bpf_object_open_opts, opts, .pin_root_path = pin_root);

	*ret = devgate__open_opts(&opts);
	if (!*ret)
		return errno > 0 ? -errno : -ENOMEM;
	return 0;
}

/* Loads skel and hands it to *ret; libbpf returns 0 or -errno. */
static int load(struct devgate **skel, struct devgate **ret)
{
	int r = devgate__load(*skel);

	if (r != 0)
		return r < 0 ? r : -EIO;
	*ret = TAKE_PTR(*skel);
	return 0;
}

int gateobj_load_maps(const char *pin_root, const int *adopt, struct devgate **ret)
{
	auto_cleanup(devgate_destroyp) struct devgate *skel = NULL;
	int r = open_object(pin_root, &skel);

	if (r < 0)
		return r;
	bpf_program__set_autoload(skel->progs.devgate_gate, false);
	bpf_program__set_autoload(skel->progs.devgate_tally, false);
	bpf_program__set_autoload(skel->progs.devgate_beside, false);
	bpf_program__set_autoload(skel->progs.devgate_mark, false);
	bpf_map__set_autocreate(skel->maps.runtime_prog, false);
	bpf_map__set_autocreate(skel->maps.self, false);
	r = adopt ? adopt_shared(skel, adopt) : 0;
	return r < 0 ? r : load(&skel, ret);
}

int gateobj_load_copy(const char *pin_root, const struct devgate *maps_owner, bool has_runtime,
		      enum bpf_attach_type gate_eat, struct devgate **ret)
{
	auto_cleanup(devgate_destroyp) struct devgate *skel = NULL;
	int r = open_object(pin_root, &skel);

	if (r < 0)
		return r;
	skel->rodata->has_runtime = has_runtime;
	skel->rodata->cgroup_events = cgroup_events();
	set_proof_comm(skel);
	bpf_program__set_expected_attach_type(skel->progs.devgate_gate, gate_eat);
	bpf_program__set_autoload(skel->progs.devgate_beside, false);
	bpf_program__set_autoload(skel->progs.devgate_mark, false);
	r = reuse_shared(skel, maps_owner);
	return r < 0 ? r : load(&skel, ret);
}

/* Opens the object for shared programs: those of gate, tally and beside are loaded. */
static int open_shared(const char *pin_root, bool gate, bool tally, bool beside,
		       struct devgate **ret)
{
	int r = open_object(pin_root, ret);

	if (r < 0)
		return r;
	(*ret)->rodata->shared = 1;
	(*ret)->rodata->cgroup_events = cgroup_events();
	set_proof_comm(*ret);
	bpf_program__set_autoload((*ret)->progs.devgate_gate, gate);
	bpf_program__set_autoload((*ret)->progs.devgate_tally, tally);
	bpf_program__set_autoload((*ret)->progs.devgate_beside, beside);
	bpf_program__set_autoload((*ret)->progs.devgate_mark, false);
	return 0;
}

int gateobj_load_shared(const char *pin_root, const struct devgate *maps_owner, int slots_fd,
			uint32_t set, enum bpf_attach_type gate_eat, bool gate, bool tally,
			struct devgate **ret)
{
	auto_cleanup(devgate_destroyp) struct devgate *skel = NULL;
	int r = open_shared(pin_root, gate, tally, false, &skel);

	if (r < 0)
		return r;
	skel->rodata->gate_set = set;
	bpf_program__set_expected_attach_type(skel->progs.devgate_gate, gate_eat);
	r = reuse_shared(skel, maps_owner);
	if (r == 0)
		r = bpf_map__reuse_fd(skel->maps.runtime_prog, slots_fd);
	return r < 0 ? r : load(&skel, ret);
}

int gateobj_load_beside(const char *pin_root, const struct devgate *maps_owner, bool mark,
			uint32_t need_mark, struct devgate **ret)
{
	auto_cleanup(devgate_destroyp) struct devgate *skel = NULL;
	int r = open_shared(pin_root, false, false, true, &skel);

	if (r < 0)
		return r;
	skel->rodata->need_mark = need_mark;
	bpf_program__set_autoload(skel->progs.devgate_mark, mark);
	/* bpf_[gs]et_retval are not offered to a program loaded with 0. */
	bpf_program__set_expected_attach_type(skel->progs.devgate_beside, BPF_CGROUP_DEVICE);
	bpf_program__set_expected_attach_type(skel->progs.devgate_mark, BPF_CGROUP_DEVICE);
	bpf_map__set_autocreate(skel->maps.runtime_prog, false);
	r = reuse_shared(skel, maps_owner);
	return r < 0 ? r : load(&skel, ret);
}

int gateobj_set_self(struct devgate *skel, uint64_t cgid, uint32_t orig_id)
{
	struct dg_self me = { .cgroup_id = cgid, .orig_id = orig_id };
	uint32_t zero = 0;

	if (bpf_map_update_elem(bpf_map__fd(skel->maps.self), &zero, &me, BPF_ANY) < 0)
		return -errno;
	return 0;
}

int gateobj_set_slot(struct devgate *skel, int orig_fd)
{
	uint32_t zero = 0;

	if (bpf_map_update_elem(bpf_map__fd(skel->maps.runtime_prog), &zero, &orig_fd, BPF_ANY) < 0)
		return -errno;
	return 0;
}

uint32_t gateobj_map_id(int fd)
{
	struct bpf_map_info mi = { 0 };
	uint32_t len = sizeof(mi);

	return fd >= 0 && bpf_obj_get_info_by_fd(fd, &mi, &len) == 0 ? mi.id : 0;
}

int gateobj_need_mark_of(int prog_fd)
{
	uint32_t map_ids[16];
	struct bpf_prog_info info = { 0 };
	uint32_t len = sizeof(info), zero = 0;

	info.nr_map_ids = ARRAY_SIZE(map_ids);
	info.map_ids = (uint64_t)(uintptr_t)map_ids;
	if (prog_fd < 0 || bpf_obj_get_info_by_fd(prog_fd, &info, &len) < 0)
		return -1;
	/* The program's own read-only data: the kernel names it "devgate.rodata". */
	for (uint32_t i = 0; i < info.nr_map_ids && i < ARRAY_SIZE(map_ids); i++) {
		struct bpf_map_info mi = { 0 };
		uint32_t mlen = sizeof(mi);
		struct devgate__rodata ro;
		auto_close int fd = bpf_map_get_fd_by_id(map_ids[i]);

		if (fd < 0 || bpf_obj_get_info_by_fd(fd, &mi, &mlen) < 0 ||
		    strcmp(mi.name, "devgate.rodata") != 0 || mi.value_size != sizeof(ro))
			continue;
		if (bpf_map_lookup_elem(fd, &zero, &ro) < 0)
			return -1;
		return (int)ro.need_mark;
	}
	return -1;
}
