// SPDX-License-Identifier: Apache-2.0
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "bpfgate.h"
#include "bpfgate_int.h"
#include "keeper.h"
#include "cleanup.h"
#include "sys/confine.h"
#include "devgate.skel.h"
#include "log.h"
#include "util.h"

#define SWEEP_INTERVAL_NS (60ULL * 1000000000)

static int libbpf_print(enum libbpf_print_level lvl, const char *fmt, va_list ap)
{
	int level = lvl == LIBBPF_WARN ? LOG_WARNING : LOG_DEBUG;
	char buf[2048];
	size_t len;

	if (level > log_get_max_level())
		return 0;
	vsnprintf(buf, sizeof(buf), fmt, ap);
	len = strlen(buf);
	while (len && buf[len - 1] == '\n')
		buf[--len] = '\0';
	log_full_errno(level, 0, "%s", buf);
	return 0;
}

void bpfgate_route_libbpf_log(void)
{
	libbpf_set_print(libbpf_print);
}

const char *bpfgate_pin_root(const struct bpfgate *bg)
{
	return bg->pin_root;
}

int bpfgate_events_fd(const struct bpfgate *bg)
{
	return bg->events_fd;
}

int bpfgate_events_dropped(const struct bpfgate *bg, int ncpus, uint64_t *ret)
{
	auto_free uint64_t *per_cpu = calloc((size_t)ncpus, sizeof(*per_cpu));
	uint32_t zero = 0;

	if (!per_cpu)
		return -ENOMEM;
	if (bpf_map_lookup_elem(bg->drops_fd, &zero, per_cpu) < 0)
		return -errno;
	*ret = 0;
	for (int i = 0; i < ncpus; i++)
		*ret += per_cpu[i];
	return 0;
}

int bpfgate_counters_fd(const struct bpfgate *bg)
{
	return bg->counters_fd;
}

int bpfgate_cg_dir(const struct bpfgate *bg, uint64_t cgid, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s/cg/%llu", bg->pin_root, (unsigned long long)cgid);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* The pin root must sit on bpffs; mount the usual one if nobody has. */
static int ensure_bpffs(const char *pin_root, struct dg_error *err)
{
	char parent[PATH_MAX];
	char *slash;
	int r;

	snprintf(parent, sizeof(parent), "%s", pin_root);
	slash = strrchr(parent, '/');
	if (!slash || slash == parent)
		return dg_error_set(err, DG_E_INVALID, EINVAL,
				    "pin root '%s' must be a subdirectory "
				    "of a bpf filesystem",
				    pin_root);
	if (strchr(slash + 1, '.'))
		return dg_error_set(err, DG_E_INVALID, EINVAL,
				    "pin root '%s': bpffs names cannot "
				    "contain '.'",
				    pin_root);
	*slash = '\0';
	if (!path_on_bpffs(parent)) {
		if (strcmp(parent, "/sys/fs/bpf") != 0) {
			dg_error_set(err, DG_E_KERNEL, ENOTSUP, "%s is not on a bpf filesystem",
				     parent);
			dg_error_hint(err, "mount one with 'mount -t bpf bpf %s'", parent);
			return -ENOTSUP;
		}
		/* The seccomp filter kills devgated at mount(2): refuse first. */
		if (confine_active()) {
			log_warning("%s is no longer a bpf filesystem; mount one again", parent);
			return dg_error_set(err, DG_E_KERNEL, EPERM,
					    "%s is not on a bpf filesystem", parent);
		}
		if (mount("bpf", parent, "bpf", 0, "mode=0700") < 0)
			return dg_error_set(err, DG_E_KERNEL, errno, "cannot mount bpffs on %s: %m",
					    parent);
		log_info("mounted bpffs on %s", parent);
	}
	if (mkdir(pin_root, 0700) < 0 && errno != EEXIST)
		return dg_error_set(err, DG_E_KERNEL, errno, "cannot create %s: %m", pin_root);
	{
		char cg[PATH_MAX];

		r = snprintf(cg, sizeof(cg), "%s/cg", pin_root);
		if (r < 0 || (size_t)r >= sizeof(cg))
			return dg_error_set(err, DG_E_INVALID, ENAMETOOLONG, "pin root too long");
		if (mkdir(cg, 0700) < 0 && errno != EEXIST)
			return dg_error_set(err, DG_E_KERNEL, errno, "cannot create %s: %m", cg);
	}
	return 0;
}

static int reuse_shared(struct devgate *skel, const struct devgate *from)
{
	struct {
		struct bpf_map *to;
		const struct bpf_map *from;
	} shared[] = {
		{ skel->maps.dg_grants_v1, from->maps.dg_grants_v1 },
		{ skel->maps.dg_counters_v1, from->maps.dg_counters_v1 },
		{ skel->maps.dg_events_v1, from->maps.dg_events_v1 },
		{ skel->maps.dg_ratelim_v1, from->maps.dg_ratelim_v1 },
		{ skel->maps.dg_event_drops_v1, from->maps.dg_event_drops_v1 },
		{ skel->maps.dg_devgrants_v1, from->maps.dg_devgrants_v1 },
		{ skel->maps.dg_cgstate_v1, from->maps.dg_cgstate_v1 },
		{ skel->maps.dg_guarded_v1, from->maps.dg_guarded_v1 },
	};
	int r = 0;

	for (size_t i = 0; i < ARRAY_SIZE(shared) && r == 0; i++) {
		r = bpf_map__set_pin_path(shared[i].to, NULL);
		if (r == 0)
			r = bpf_map__reuse_fd(shared[i].to, bpf_map__fd(shared[i].from));
	}
	return r;
}

/*
 * Opens and loads one copy of the object. The first (ROLE_MAPS) creates the
 * shared maps or reuses their pins (libbpf's pin-by-name); every later copy
 * (ROLE_PROGS: a gate and a tally, one ELF and BTF load for both) shares
 * that copy's maps, so all of them see the same grants, counters and events.
 * The gate's expected_attach_type must match the program it may wrap.
 */
#define SHARED_MAPS 8
static const char *const shared_names[SHARED_MAPS] = {
	"dg_grants_v1",	     "dg_counters_v1",	"dg_events_v1",	 "dg_ratelim_v1",
	"dg_event_drops_v1", "dg_devgrants_v1", "dg_cgstate_v1", "dg_guarded_v1",
};

/* The maps a live copy uses, so a new one adopts them instead of new ones. */
static int adopt_shared(struct devgate *skel, const int *fds)
{
	struct bpf_map *maps[SHARED_MAPS] = {
		skel->maps.dg_grants_v1,  skel->maps.dg_counters_v1,	skel->maps.dg_events_v1,
		skel->maps.dg_ratelim_v1, skel->maps.dg_event_drops_v1, skel->maps.dg_devgrants_v1,
		skel->maps.dg_cgstate_v1, skel->maps.dg_guarded_v1,
	};
	int r = 0;

	for (size_t i = 0; i < SHARED_MAPS && r == 0; i++) {
		if (fds[i] >= 0)
			r = bpf_map__reuse_fd(maps[i], fds[i]);
	}
	return r;
}

static int load_copy_adopting(const struct bpfgate *bg, enum role role, bool has_runtime,
			      enum bpf_attach_type gate_eat, const int *adopt,
			      struct devgate **ret);

int bpfgate_load_copy(const struct bpfgate *bg, enum role role, bool has_runtime,
		      enum bpf_attach_type gate_eat, struct devgate **ret)
{
	return load_copy_adopting(bg, role, has_runtime, gate_eat, NULL, ret);
}

static int open_object(const struct bpfgate *bg, struct devgate **ret)
{
	LIBBPF_OPTS(bpf_object_open_opts, opts, .pin_root_path = bg->pin_root);

	*ret = devgate__open_opts(&opts);
	if (!*ret)
		return errno > 0 ? -errno : -ENOMEM;
	return 0;
}

static int load_copy_adopting(const struct bpfgate *bg, enum role role, bool has_runtime,
			      enum bpf_attach_type gate_eat, const int *adopt, struct devgate **ret)
{
	auto_cleanup(devgate_destroyp) struct devgate *skel = NULL;
	bool progs = role == ROLE_PROGS;
	int r = open_object(bg, &skel);

	if (r < 0)
		return r;
	skel->rodata->has_runtime = has_runtime;
	bpf_program__set_autoload(skel->progs.devgate_gate, progs);
	bpf_program__set_autoload(skel->progs.devgate_tally, progs);
	bpf_program__set_expected_attach_type(skel->progs.devgate_gate, gate_eat);
	bpf_map__set_autocreate(skel->maps.runtime_prog, progs);
	bpf_map__set_autocreate(skel->maps.self, progs);
	r = progs ? reuse_shared(skel, bg->maps) : adopt ? adopt_shared(skel, adopt) : 0;
	if (r == 0)
		r = devgate__load(skel);
	if (r != 0) /* libbpf returns 0 or -errno */
		return r < 0 ? r : -EIO;
	*ret = TAKE_PTR(skel);
	return 0;
}

int bpfgate_load_shared(const struct bpfgate *bg, uint32_t set, enum bpf_attach_type gate_eat,
			bool gate, bool tally, struct devgate **ret)
{
	auto_cleanup(devgate_destroyp) struct devgate *skel = NULL;
	int r = open_object(bg, &skel);

	if (r < 0)
		return r;
	skel->rodata->shared = 1;
	skel->rodata->gate_set = set;
	bpf_program__set_autoload(skel->progs.devgate_gate, gate);
	bpf_program__set_autoload(skel->progs.devgate_tally, tally);
	bpf_program__set_expected_attach_type(skel->progs.devgate_gate, gate_eat);
	r = reuse_shared(skel, bg->maps);
	if (r == 0)
		r = bpf_map__reuse_fd(skel->maps.runtime_prog, bg->slots_fd[set]);
	if (r == 0)
		r = devgate__load(skel);
	if (r != 0)
		return r < 0 ? r : -EIO;
	*ret = TAKE_PTR(skel);
	return 0;
}

/* Tells a copy which container it serves, and for which runtime program. */
int bpfgate_set_self(struct devgate *skel, uint64_t cgid, uint32_t orig_id)
{
	struct dg_self me = { .cgroup_id = cgid, .orig_id = orig_id };
	uint32_t zero = 0;

	return bpf_map_update_elem(bpf_map__fd(skel->maps.self), &zero, &me, BPF_ANY) < 0 ? -errno
											  : 0;
}

void bpfgate_prepare(struct bpfgate *bg)
{
	int r;

	if (bg->spare || bg->gate_fd[0] >= 0)
		return; /* the shared gates serve every cgroup: no spare needed */
	/* runc, crun and LXC load their programs with expected_attach_type 0. */
	r = bpfgate_load_copy(bg, ROLE_PROGS, true, 0, &bg->spare);
	if (r < 0)
		log_debug_errno(r, "cannot load a spare gate yet: %m");
}

int bpfgate_query(int cgfd, bool effective, struct attached *ret)
{
	LIBBPF_OPTS(bpf_prog_query_opts, q, .prog_ids = ret->ids, .prog_cnt = MAX_PROGS);

	ret->n = 0;
	ret->flags = 0;
	if (effective)
		q.query_flags = BPF_F_QUERY_EFFECTIVE;
	if (bpf_prog_query_opts(cgfd, BPF_CGROUP_DEVICE, &q) < 0)
		return -errno;
	ret->n = q.prog_cnt;
	ret->flags = q.attach_flags;
	return 0;
}

/* The shared maps program id reads, by name, into fds (left -1 if absent). */
static bool maps_of(uint32_t id, int *fds)
{
	uint32_t map_ids[16];
	struct bpf_prog_info info = { 0 };
	uint32_t len = sizeof(info);
	auto_close int fd = bpf_prog_get_fd_by_id(id);
	bool found = false;

	info.nr_map_ids = ARRAY_SIZE(map_ids);
	info.map_ids = (uint64_t)(uintptr_t)map_ids;
	if (fd < 0 || bpf_obj_get_info_by_fd(fd, &info, &len) < 0 ||
	    strcmp(info.name, "devgate_gate") != 0)
		return false;
	for (uint32_t i = 0; i < info.nr_map_ids && i < ARRAY_SIZE(map_ids); i++) {
		struct bpf_map_info mi = { 0 };
		uint32_t mlen = sizeof(mi);
		int mfd = bpf_map_get_fd_by_id(map_ids[i]);

		if (mfd < 0 || bpf_obj_get_info_by_fd(mfd, &mi, &mlen) < 0) {
			safe_close(mfd);
			continue;
		}
		for (size_t k = 0; k < SHARED_MAPS; k++) {
			if (strcmp(mi.name, shared_names[k]) == 0 && fds[k] < 0) {
				fds[k] = TAKE_FD(mfd);
				found |= k == 0;
			}
		}
		safe_close(mfd);
	}
	return found;
}

/*
 * The grants map is pinned no more, but leased cgroups still carry our gates:
 * the maps those gates read are ours, proven by the records that name the
 * cgroups. Adopting them (and pinning them again) keeps one grants map, never
 * two that disagree.
 */
static bool find_live_maps(const char *pin_root, const int *cgfds, size_t n, int *fds)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/dg_grants_v1", pin_root);
	if (access(path, F_OK) == 0)
		return false; /* pinned: libbpf reuses the pin */
	for (size_t i = 0; i < n; i++) {
		struct attached now = { 0 };

		if (cgfds[i] < 0 || bpfgate_query(cgfds[i], false, &now) < 0)
			continue;
		for (uint32_t k = 0; k < now.n; k++) {
			if (maps_of(now.ids[k], fds))
				return true;
		}
	}
	return false;
}

/* The guard of one major, as inventory_guards() sees it. */
static struct dg_guard guard_of(const struct dg_inventory *inv, uint32_t major)
{
	struct dg_guard g = { 0 };

	if (inventory_guards_all(inv, major)) {
		g.all = 1;
		return g;
	}
	for (uint32_t m = 0; major == DG_DRM_MAJOR && m < DG_GUARD_MINORS; m++) {
		if (inventory_guards(inv, major, m))
			g.minors[m / 64] |= 1ull << (m % 64);
	}
	return g;
}

/*
 * Writes dg_guarded_v1 from the inventory: every entry when all (the pinned
 * map may hold another run's), else the ones that changed.
 */
static int guard_write(struct bpfgate *bg, const struct dg_inventory *inv,
		       const struct dg_inventory *also, bool all)
{
	for (uint32_t major = 0; major < DG_GUARD_MAJORS; major++) {
		struct dg_guard g = major ? guard_of(inv, major) : (struct dg_guard){ 0 };

		if (major && also) {
			struct dg_guard a = guard_of(also, major);

			g.all |= a.all;
			for (size_t w = 0; w < ARRAY_SIZE(g.minors); w++)
				g.minors[w] |= a.minors[w];
		}

		if (!all && memcmp(&g, &bg->guard[major], sizeof(g)) == 0)
			continue;
		if (bpf_map_update_elem(bg->guarded_fd, &major, &g, BPF_ANY) < 0)
			return -errno;
		bg->guard[major] = g;
	}
	return 0;
}

int bpfgate_guard_sync(struct bpfgate *bg, const struct dg_inventory *inv)
{
	return guard_write(bg, inv, NULL, false);
}

int bpfgate_guard_sync_both(struct bpfgate *bg, const struct dg_inventory *inv,
			    const struct dg_inventory *also)
{
	return guard_write(bg, inv, also, false);
}

int bpfgate_open(const char *pin_root, const struct dg_inventory *inv, int cgroot_fd,
		 const int *leased_cgfds, size_t n_leased, struct bpfgate **ret,
		 struct dg_error *err)
{
	int adopt[SHARED_MAPS] = { -1, -1, -1, -1, -1, -1, -1, -1 };
	struct bpf_map_info mi = { 0 };
	uint32_t mlen = sizeof(mi);
	struct bpfgate *bg;
	bool adopting;
	int r;

	r = ensure_bpffs(pin_root, err);
	if (r < 0)
		return r;
	bg = calloc(1, sizeof(*bg));
	if (!bg)
		return -ENOMEM;
	bg->tally_fd = bg->cgstate_fd = -1;
	for (size_t e = 0; e < DG_GATE_SETS; e++)
		bg->gate_fd[e] = bg->slots_fd[e] = -1;
	bg->pin_root = strdup(pin_root);
	bg->guard = calloc(DG_GUARD_MAJORS, sizeof(*bg->guard));
	if (!bg->pin_root || !bg->guard) {
		bpfgate_free(bg);
		return -ENOMEM;
	}
	adopting = find_live_maps(pin_root, leased_cgfds, n_leased, adopt);
	r = load_copy_adopting(bg, ROLE_MAPS, false, 0, adopting ? adopt : NULL, &bg->maps);
	for (size_t i = 0; i < SHARED_MAPS; i++)
		safe_close(adopt[i]);
	if (r == 0 && adopting)
		log_notice(
			"adopted the BPF maps of the gates on leased cgroups and pinned them again "
			"under %s",
			pin_root);
	if (r == 0)
		r = keeper_init(&bg->keeper, cgroot_fd, pin_root);
	if (r < 0 || !bg->maps) {
		r = r < 0 ? r : -EIO;
		dg_error_set(err, DG_E_KERNEL, r, "cannot create devgate's BPF maps under %s: %s",
			     pin_root, strerror(-r));
		dg_error_hint(err,
			      "devgated needs CAP_BPF and CAP_SYS_ADMIN; pins left by an "
			      "incompatible release can be removed with 'rm -r %s'",
			      pin_root);
		bpfgate_free(bg);
		return r;
	}
	bg->grants_fd = bpf_map__fd(bg->maps->maps.dg_grants_v1);
	bg->counters_fd = bpf_map__fd(bg->maps->maps.dg_counters_v1);
	bg->events_fd = bpf_map__fd(bg->maps->maps.dg_events_v1);
	bg->ratelimit_fd = bpf_map__fd(bg->maps->maps.dg_ratelim_v1);
	bg->drops_fd = bpf_map__fd(bg->maps->maps.dg_event_drops_v1);
	bg->devgrants_fd = bpf_map__fd(bg->maps->maps.dg_devgrants_v1);
	bg->guarded_fd = bpf_map__fd(bg->maps->maps.dg_guarded_v1);
	r = guard_write(bg, inv, NULL, true);
	if (r < 0) {
		dg_error_set(err, DG_E_KERNEL, r, "cannot fill dg_guarded_v1 under %s: %s",
			     pin_root, strerror(-r));
		bpfgate_free(bg);
		return r;
	}
	if (bpf_obj_get_info_by_fd(bg->grants_fd, &mi, &mlen) == 0)
		bg->grants_id = mi.id;
	mi = (struct bpf_map_info){ 0 };
	mlen = sizeof(mi);
	if (bpf_obj_get_info_by_fd(bg->counters_fd, &mi, &mlen) == 0)
		bg->counters_id = mi.id;
	*ret = bg;
	return 0;
}

/*
 * Pins removed at run time (an admin, a bpffs remount): pinned again, so a
 * restart finds them. The maps live on regardless: devgated holds them.
 */
void bpfgate_repin(struct bpfgate *bg)
{
	const int fds[SHARED_MAPS] = { bg->grants_fd,	 bg->counters_fd, bg->events_fd,
				       bg->ratelimit_fd, bg->drops_fd,	  bg->devgrants_fd,
				       bg->cgstate_fd,	 bg->guarded_fd };
	char path[PATH_MAX];

	if (access(bg->pin_root, F_OK) == 0 &&
	    snprintf(path, sizeof(path), "%s/dg_grants_v1", bg->pin_root) > 0 &&
	    access(path, F_OK) == 0)
		return;
	if (ensure_bpffs(bg->pin_root, NULL) < 0)
		return;
	for (size_t i = 0; i < SHARED_MAPS; i++) {
		snprintf(path, sizeof(path), "%s/%s", bg->pin_root, shared_names[i]);
		if (access(path, F_OK) < 0 && bpf_obj_pin(fds[i], path) < 0)
			log_warning_errno(errno, "cannot pin %s again: %m", path);
	}
	log_notice("pinned devgate's maps again under %s", bg->pin_root);
}

void bpfgate_free(struct bpfgate *bg)
{
	if (!bg)
		return;
	keeper_fini(&bg->keeper);
	for (unsigned int i = 0; i < bg->n_pending; i++)
		safe_close(bg->pending[i].cgfd);
	devgate__destroy(bg->spare);
	devgate__destroy(bg->maps);
	free(bg->pin_root);
	free(bg->guard);
	free(bg);
}

static struct dg_grant_key grant_key(uint64_t cgid, const struct dg_node *node)
{
	return (struct dg_grant_key){
		.cgroup_id = cgid,
		.type = node->block ? DG_DEV_BLOCK : DG_DEV_CHAR,
		.major = node->major,
		.minor = node->minor,
	};
}

int bpfgate_grant_put(struct bpfgate *bg, uint64_t cgid, const struct dg_node *node)
{
	struct dg_grant_key key = grant_key(cgid, node);
	struct dg_grant_val val = { .access = node->access ? node->access
							   : DG_ACC_READ | DG_ACC_WRITE };

	return bpf_map_update_elem(bg->grants_fd, &key, &val, BPF_ANY) < 0 ? -errno : 0;
}

int bpfgate_grant_del(struct bpfgate *bg, uint64_t cgid, const struct dg_node *node)
{
	struct dg_grant_key key = grant_key(cgid, node);

	if (bpf_map_delete_elem(bg->grants_fd, &key) < 0 && errno != ENOENT)
		return -errno;
	return 0;
}

int bpfgate_devgrants_set(struct bpfgate *bg, bool any)
{
	uint32_t zero = 0, val = any;

	return bpf_map_update_elem(bg->devgrants_fd, &zero, &val, BPF_ANY) < 0 ? -errno : 0;
}

bool bpfgate_is_guarded(const struct bpfgate *bg, uint32_t major, uint32_t minor)
{
	const struct dg_guard *g = major < DG_GUARD_MAJORS ? &bg->guard[major] : NULL;

	if (!g || g->all)
		return g != NULL;
	return minor < DG_GUARD_MINORS && (g->minors[minor / 64] >> (minor % 64)) & 1;
}

int bpfgate_devgrants_sync(struct bpfgate *bg)
{
	auto_free struct dg_grant_key *keys = NULL;
	bool any = false;
	size_t n = 0;
	int r = bpfgate_grants_list(bg, &keys, &n);

	if (r < 0)
		return r;
	for (size_t i = 0; i < n && !any; i++)
		any = !bpfgate_is_guarded(bg, keys[i].major, keys[i].minor);
	r = bpfgate_devgrants_set(bg, any);
	return r < 0 ? r : any;
}

int bpfgate_grants_list(struct bpfgate *bg, struct dg_grant_key **ret, size_t *ret_n)
{
	auto_free struct dg_grant_key *keys = NULL;
	struct dg_grant_key key, next;
	size_t n = 0, cap = 0;
	void *prev = NULL;

	while (bpf_map_get_next_key(bg->grants_fd, prev, &next) == 0) {
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 64;
			struct dg_grant_key *nk = realloc(keys, ncap * sizeof(*keys));

			if (!nk)
				return -ENOMEM;
			keys = nk;
			cap = ncap;
		}
		keys[n++] = next;
		key = next;
		prev = &key;
	}
	if (errno != ENOENT)
		return -errno;
	*ret = TAKE_PTR(keys);
	*ret_n = n;
	return 0;
}

/*
 * Deletes the keys of map fd whose first field, a u64 cgroup id, is cgid.
 * Collects first: deleting while walking restarts the walk.
 */
/* Deletes every key (which starts with a cgroup id) that keep() rejects. */
static int drop_keys(int fd, size_t key_size, bool (*keep)(uint64_t cgid, const void *data),
		     const void *data)
{
	auto_free char *doomed = NULL;
	auto_free char *key = calloc(2, key_size);
	char *next = key ? key + key_size : NULL;
	size_t n = 0, cap = 0;
	void *prev = NULL;

	if (!key)
		return -ENOMEM;
	/* Collect first: deleting while walking restarts the walk. */
	while (bpf_map_get_next_key(fd, prev, next) == 0) {
		uint64_t id;

		memcpy(&id, next, sizeof(id));
		if (!keep(id, data)) {
			if (n == cap) {
				size_t ncap = cap ? cap * 2 : 16;
				char *nd = realloc(doomed, ncap * key_size);

				if (!nd)
					return -ENOMEM;
				doomed = nd;
				cap = ncap;
			}
			memcpy(doomed + n++ * key_size, next, key_size);
		}
		memcpy(key, next, key_size);
		prev = key;
	}
	for (size_t i = 0; i < n; i++)
		(void)bpf_map_delete_elem(fd, doomed + i * key_size);
	return (int)(n > INT_MAX ? INT_MAX : n);
}

static int drop_both(struct bpfgate *bg, bool (*keep)(uint64_t cgid, const void *data),
		     const void *data)
{
	int r = drop_keys(bg->counters_fd, sizeof(struct dg_count_key), keep, data);
	int r2 = drop_keys(bg->ratelimit_fd, sizeof(struct dg_ratelimit_key), keep, data);

	return r < 0 ? r : r2 < 0 ? r2 : r;
}

/*
 * A released cgroup's counters, by key: O(the devices it could have
 * counted), not a walk of the whole map, which grows with every lease on
 * the host. The gate and tally count only GPU-class devices; the inventory's
 * are deleted here, and any other (a minor the inventory lacks) is left to
 * the periodic sweep.
 */
int bpfgate_counters_drop(struct bpfgate *bg, uint64_t cgid, const struct dg_node *nodes, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct dg_ratelimit_key rk = {
			.cgroup_id = cgid,
			.major = nodes[i].major,
			.minor = nodes[i].minor,
		};

		for (unsigned int acc = 1; acc <= (DG_ACC_MKNOD | DG_ACC_READ | DG_ACC_WRITE);
		     acc++) {
			struct dg_count_key k = {
				.cgroup_id = cgid,
				.major = nodes[i].major,
				.minor = nodes[i].minor,
				.type = DG_DEV_CHAR,
				.access = (uint16_t)acc,
			};

			(void)bpf_map_delete_elem(bg->counters_fd, &k);
		}
		(void)bpf_map_delete_elem(bg->ratelimit_fd, &rk);
	}
	bg->sweep_due = true;
	return 0;
}

bool bpfgate_sweep_due(struct bpfgate *bg, uint64_t now_ns)
{
	if (!bg->sweep_due || now_ns - bg->last_sweep_ns < SWEEP_INTERVAL_NS)
		return false;
	bg->sweep_due = false;
	bg->last_sweep_ns = now_ns;
	return true;
}

int bpfgate_counters_sweep(struct bpfgate *bg, bool (*keep)(uint64_t cgid, const void *data),
			   const void *data)
{
	return drop_both(bg, keep, data);
}
