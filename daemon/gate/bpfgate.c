// SPDX-License-Identifier: Apache-2.0
/*
 * devgate's shared BPF maps: made, or adopted, at start (bpfgate_open), the
 * pins that keep them, and what other folders read and write in them: the
 * grants, the flag for device grants, the GPU-class devices, the counters
 * and the count of dropped events. Pins live under the pin root, on bpffs
 * (mounted here if nobody has).
 *
 * It knows nothing of leases, containers or struct daemon: a grant is a
 * cgroup id and a device node. Guarding a cgroup is guard.c's.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "adopt.h"
#include "bpfgate.h"
#include "cleanup.h"
#include "gate_int.h"
#include "gateobj.h"
#include "keeper.h"
#include "log.h"
#include "sys/confine.h"
#include "util.h"

#define SWEEP_INTERVAL_NS (60ULL * 1000000000)

/* libbpf's messages in devgate's log: warnings as warnings, the rest as debug. */
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

const char *bpfgate_proof_comm(void)
{
	return gateobj_proof_comm();
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
	return bg->map_fd[MAP_EVENTS];
}

int bpfgate_events_dropped(const struct bpfgate *bg, int ncpus, uint64_t *ret)
{
	auto_free uint64_t *per_cpu = calloc((size_t)ncpus, sizeof(*per_cpu));
	uint32_t zero = 0;

	if (!per_cpu)
		return -ENOMEM;
	if (bpf_map_lookup_elem(bg->map_fd[MAP_DROPS], &zero, per_cpu) < 0)
		return -errno;
	*ret = 0;
	for (int i = 0; i < ncpus; i++)
		*ret += per_cpu[i];
	return 0;
}

int bpfgate_counters_fd(const struct bpfgate *bg)
{
	return bg->map_fd[MAP_COUNTERS];
}

/*
 * Makes sure the pin root and its cg/ directory exist on a bpf filesystem.
 * If /sys/fs/bpf is not one, mounts it (the usual place, which nobody
 * mounted yet); any other parent must already be bpffs.
 */
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

void bpfgate_prepare(struct bpfgate *bg)
{
	int r;

	if (bg->spare || bg->gate_fd[0] >= 0)
		return; /* the shared gates serve every cgroup: no spare needed */
	/* runc, crun and LXC load their programs with expected_attach_type 0. */
	r = gateobj_load_copy(bg->pin_root, bg->maps, true, 0, &bg->spare);
	if (r < 0)
		log_debug_errno(r, "cannot load a spare gate yet: %m");
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

/* Puts major:minor in dg_known_v1 unless *r already holds an error. */
static void known_put_one(int fd, uint32_t major, uint32_t minor, int *r)
{
	struct dg_dev_key k = { .major = major, .minor = minor };
	uint32_t one = 1;

	if (*r == 0 && bpf_map_update_elem(fd, &k, &one, BPF_ANY) < 0)
		*r = -errno;
}

/* Puts every node of inv in dg_known_v1: GPUs, card nodes, control nodes, MIG capabilities. */
static int known_put(int fd, const struct dg_inventory *inv)
{
	struct dg_node nodes[DG_MAX_NODES];
	size_t n = inventory_nodes(inv, nodes, DG_MAX_NODES);
	int r = 0;

	for (size_t i = 0; i < n; i++)
		known_put_one(fd, nodes[i].major, nodes[i].minor, &r);
	for (size_t i = 0; i < inv->n_gpus; i++) {
		const struct dg_gpu *g = &inv->gpus[i];

		if (g->family != DG_VENDOR_NVIDIA && g->has_card)
			known_put_one(fd, DG_DRM_MAJOR, g->card_minor, &r);
		for (size_t j = 0; inv->majors.has_caps && j < g->n_gi; j++) {
			known_put_one(fd, inv->majors.caps, g->gi[j].minor, &r);
			for (size_t c = 0; c < g->gi[j].n_ci; c++)
				known_put_one(fd, inv->majors.caps, g->gi[j].ci[c].minor, &r);
		}
	}
	return r;
}

/*
 * Makes dg_known_v1 the nodes of inv and also (may be NULL): the devices the
 * counters map keys one by one; the gate and tally count any other minor of
 * a guarded major under the cgroup's one "other" key.
 */
static int known_write(struct bpfgate *bg, const struct dg_inventory *inv,
		       const struct dg_inventory *also)
{
	int fd = bg->map_fd[MAP_KNOWN];
	struct dg_dev_key key, next, stale[256];
	void *prev = NULL;
	size_t n = 0;
	int r = known_put(fd, inv);

	if (r == 0 && also)
		r = known_put(fd, also);
	/* Nodes of an earlier inventory go, a batch at a time (a walk restarts after a delete). */
	while (r == 0 && bpf_map_get_next_key(fd, prev, &next) == 0) {
		const struct dg_gpu *gpu;
		char path[64];

		key = next;
		prev = &key;
		if (!inventory_find_node(inv, key.major, key.minor, path, sizeof(path), &gpu) &&
		    !(also &&
		      inventory_find_node(also, key.major, key.minor, path, sizeof(path), &gpu)) &&
		    n < ARRAY_SIZE(stale))
			stale[n++] = key;
	}
	for (size_t i = 0; i < n; i++)
		(void)bpf_map_delete_elem(fd, &stale[i]);
	return r;
}

/*
 * Writes dg_guarded_v1 from the inventory: every entry when all (the pinned
 * map may hold another run's), else the ones that changed; and dg_known_v1.
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
		if (bpf_map_update_elem(bg->map_fd[MAP_GUARDED], &major, &g, BPF_ANY) < 0)
			return -errno;
		bg->guard[major] = g;
	}
	return known_write(bg, inv, also);
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

/* A bpfgate with nothing open yet: every fd -1. NULL when out of memory. */
static struct bpfgate *bpfgate_new(const char *pin_root)
{
	struct bpfgate *bg = calloc(1, sizeof(*bg));

	if (!bg)
		return NULL;
	bg->tally_fd = bg->beside_fd[0] = bg->beside_fd[1] = bg->mark_fd = -1;
	for (size_t i = 0; i < SHARED_MAPS; i++)
		bg->map_fd[i] = -1;
	for (size_t e = 0; e < DG_GATE_SETS; e++)
		bg->gate_fd[e] = bg->slots_fd[e] = -1;
	bg->pin_root = strdup(pin_root);
	bg->guard = calloc(DG_GUARD_MAJORS, sizeof(*bg->guard));
	if (!bg->pin_root || !bg->guard) {
		bpfgate_free(bg);
		return NULL;
	}
	return bg;
}

/*
 * Loads the shared maps into bg. With their pins gone, the maps that the
 * programs on the leased cgroups use are adopted; a map pinned under an
 * earlier release's name is adopted too; libbpf reuses the other pins or
 * makes new maps, and pins them. Returns 0 or -errno.
 */
static int load_maps(struct bpfgate *bg, const int *leased_cgfds, size_t n_leased)
{
	struct bpf_map *maps[SHARED_MAPS];
	int adopt[SHARED_MAPS];
	int old, r;
	bool live;

	for (size_t i = 0; i < SHARED_MAPS; i++)
		adopt[i] = -1;
	live = adopt_live_maps(bg->pin_root, leased_cgfds, n_leased, adopt);
	old = adopt_old_pins(bg->pin_root, adopt);
	r = gateobj_load_maps(bg->pin_root, adopt, &bg->maps);
	for (size_t i = 0; i < SHARED_MAPS; i++)
		safe_close(adopt[i]);
	if (r < 0)
		return r;
	if (live)
		log_notice(
			"adopted the BPF maps of the gates on leased cgroups and pinned them again "
			"under %s",
			bg->pin_root);
	if (old > 0)
		log_notice("adopted %d BPF map(s) pinned under an earlier release's name in %s",
			   old, bg->pin_root);
	gateobj_maps(bg->maps, maps);
	for (size_t i = 0; i < SHARED_MAPS; i++)
		bg->map_fd[i] = bpf_map__fd(maps[i]);
	bg->grants_id = gateobj_map_id(bg->map_fd[MAP_GRANTS]);
	bg->counters_id = gateobj_map_id(bg->map_fd[MAP_COUNTERS]);
	return 0;
}

int bpfgate_open(const char *pin_root, const struct dg_inventory *inv, int cgroot_fd,
		 const int *leased_cgfds, size_t n_leased, struct bpfgate **ret,
		 struct dg_error *err)
{
	struct bpfgate *bg;
	int r;

	r = ensure_bpffs(pin_root, err);
	if (r < 0)
		return r;
	bg = bpfgate_new(pin_root);
	if (!bg)
		return -ENOMEM;
	r = load_maps(bg, leased_cgfds, n_leased);
	if (r == 0)
		r = keeper_init(&bg->keeper, cgroot_fd, pin_root);
	if (r < 0) {
		dg_error_set(err, DG_E_KERNEL, r, "cannot create devgate's BPF maps under %s: %s",
			     pin_root, strerror(-r));
		dg_error_hint(err,
			      "devgated needs CAP_BPF and CAP_SYS_ADMIN; pins left by an "
			      "incompatible release can be removed with 'rm -r %s'",
			      pin_root);
		bpfgate_free(bg);
		return r;
	}
	r = guard_write(bg, inv, NULL, true);
	if (r < 0) {
		dg_error_set(err, DG_E_KERNEL, r, "cannot fill %s under %s: %s",
			     gateobj_names[MAP_GUARDED].name, pin_root, strerror(-r));
		bpfgate_free(bg);
		return r;
	}
	*ret = bg;
	return 0;
}

int bpfgate_lock_root(const char *pin_root, int *ret, struct dg_error *err)
{
	auto_close int fd = -1;
	int r = ensure_bpffs(pin_root, err);

	if (r < 0)
		return r;
	/* The directory itself: any path to it, a symlink or a bind mount, locks the same. */
	fd = open(pin_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return dg_error_set(err, DG_E_KERNEL, errno, "cannot open %s: %m", pin_root);
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		if (errno != EWOULDBLOCK)
			return dg_error_set(err, DG_E_KERNEL, errno, "cannot lock %s: %m",
					    pin_root);
		r = dg_error_set(err, DG_E_STATE, errno,
				 "pin root %s is in use by another devgated", pin_root);
		dg_error_hint(err, "two daemons on one pin root undo each other's grants: stop the "
				   "other one, or give this one its own --pin-root");
		return r;
	}
	*ret = TAKE_FD(fd);
	return 0;
}

/*
 * Pins removed at run time (an admin, a bpffs remount) are pinned again, so
 * a restart finds them. The maps live on regardless: devgated holds them.
 */
void bpfgate_repin(struct bpfgate *bg)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", bg->pin_root, gateobj_names[MAP_GRANTS].name);
	if (access(path, F_OK) == 0)
		return;
	if (ensure_bpffs(bg->pin_root, NULL) < 0)
		return;
	for (size_t i = 0; i < SHARED_MAPS; i++) {
		snprintf(path, sizeof(path), "%s/%s", bg->pin_root, gateobj_names[i].name);
		if (access(path, F_OK) < 0 && bpf_obj_pin(bg->map_fd[i], path) < 0)
			log_warning_errno(errno, "cannot pin %s again: %m", path);
	}
	log_notice("pinned devgate's maps again under %s", bg->pin_root);
}

void bpfgate_free(struct bpfgate *bg)
{
	if (!bg)
		return;
	keeper_fini(&bg->keeper);
	devgate__destroy(bg->spare);
	devgate__destroy(bg->maps);
	free(bg->pin_root);
	free(bg->guard);
	free(bg);
}

/* The grants map's key for node in cgroup cgid. */
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

	return bpf_map_update_elem(bg->map_fd[MAP_GRANTS], &key, &val, BPF_ANY) < 0 ? -errno : 0;
}

int bpfgate_grants_put(struct bpfgate *bg, uint64_t cgid, const struct dg_node *nodes, size_t n,
		       size_t *ret_failed)
{
	LIBBPF_OPTS(bpf_map_batch_opts, opts, .elem_flags = BPF_ANY);
	struct dg_grant_key keys[DG_MAX_NODES];
	struct dg_grant_val vals[DG_MAX_NODES];
	uint32_t count = (uint32_t)n;
	size_t i = n;

	*ret_failed = 0;
	if (n > DG_MAX_NODES)
		return -E2BIG;
	for (size_t k = 0; k < n; k++) {
		keys[k] = grant_key(cgid, &nodes[k]);
		vals[k] = (struct dg_grant_val){ .access = nodes[k].access
								   ? nodes[k].access
								   : DG_ACC_READ | DG_ACC_WRITE };
	}
	/* One syscall for all; a kernel without batches for hash maps: one each. */
	if (n && bpf_map_update_batch(bg->map_fd[MAP_GRANTS], keys, vals, &count, &opts) < 0) {
		if (errno != EINVAL && errno != ENOTSUP && errno != 524 /* ENOTSUPP */) {
			*ret_failed = count < n ? count : 0;
			return -errno;
		}
		for (i = 0; i < n; i++) {
			if (bpf_map_update_elem(bg->map_fd[MAP_GRANTS], &keys[i], &vals[i],
						BPF_ANY) < 0)
				break;
		}
	}
	*ret_failed = i;
	return i < n ? -errno : 0;
}

int bpfgate_grant_del(struct bpfgate *bg, uint64_t cgid, const struct dg_node *node)
{
	struct dg_grant_key key = grant_key(cgid, node);

	if (bpf_map_delete_elem(bg->map_fd[MAP_GRANTS], &key) < 0 && errno != ENOENT)
		return -errno;
	return 0;
}

int bpfgate_devgrants_set(struct bpfgate *bg, bool any)
{
	uint32_t zero = 0, val = any;

	return bpf_map_update_elem(bg->map_fd[MAP_DEVGRANTS], &zero, &val, BPF_ANY) < 0 ? -errno
											: 0;
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

	while (bpf_map_get_next_key(bg->map_fd[MAP_GRANTS], prev, &next) == 0) {
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
 * Deletes every key of map fd (keys start with a u64 cgroup id) whose
 * cgroup keep() rejects. Returns how many it deleted, or -errno.
 */
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

/* drop_keys() on the counters and on the rate-limit entries; returns the counters' count. */
static int drop_both(struct bpfgate *bg, bool (*keep)(uint64_t cgid, const void *data),
		     const void *data)
{
	int r = drop_keys(bg->map_fd[MAP_COUNTERS], sizeof(struct dg_count_key), keep, data);
	int r2 = drop_keys(bg->map_fd[MAP_RATELIM], sizeof(struct dg_ratelimit_key), keep, data);

	return r < 0 ? r : r2 < 0 ? r2 : r;
}

/*
 * Deleted by key: the cost is the devices the cgroup could have counted,
 * not a walk of the whole map, which grows with every lease on the host.
 * The gate and tally count only GPU-class devices; the nodes given are
 * deleted here, and any other (a minor the inventory lacks) is left to the
 * periodic sweep.
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

			(void)bpf_map_delete_elem(bg->map_fd[MAP_COUNTERS], &k);
		}
		(void)bpf_map_delete_elem(bg->map_fd[MAP_RATELIM], &rk);
	}
	/* The cgroup's "other" counters and its budget of denial events. */
	for (unsigned int acc = 1; n && acc <= (DG_ACC_MKNOD | DG_ACC_READ | DG_ACC_WRITE); acc++) {
		struct dg_count_key k = { .cgroup_id = cgid,
					  .major = DG_DEV_OTHER,
					  .minor = DG_DEV_OTHER,
					  .type = DG_DEV_CHAR,
					  .access = (uint16_t)acc };

		(void)bpf_map_delete_elem(bg->map_fd[MAP_COUNTERS], &k);
	}
	if (n) {
		struct dg_ratelimit_key bk = { .cgroup_id = cgid, .major = DG_DEV_OTHER };

		(void)bpf_map_delete_elem(bg->map_fd[MAP_RATELIM], &bk);
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
