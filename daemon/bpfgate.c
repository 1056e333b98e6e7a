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
#include "keeper.h"
#include "cleanup.h"
#include "devgate.skel.h"
#include "log.h"
#include "util.h"

#define MAX_PROGS 64 /* the kernel's limit per cgroup and attach type */
#define SWEEP_INTERVAL_NS (60ULL * 1000000000)

struct bpfgate {
	char *pin_root;
	struct devgate *maps;  /* owns the shared maps; no programs loaded */
	struct devgate *spare; /* a copy loaded ahead of need (gate for runc's kind) */
	uint32_t nvidia_major; /* 0: none; set in each copy's read-only data */
	uint32_t uvm_major;
	int grants_fd;
	int counters_fd;
	int events_fd;
	int ratelimit_fd;
	int drops_fd;
	uint32_t grants_id;
	bool sweep_due; /* counters released by key; a stray may remain */
	uint64_t last_sweep_ns;
	uint32_t counters_id; /* proves a program ours: gate and tally both count in it */
	struct keeper keeper;
};

enum pin_kind {
	PIN_GATE,
	PIN_DEFAULT,
	PIN_TALLY
};

struct pinned {
	enum pin_kind kind;
	uint32_t id;	  /* the pinned program's id */
	uint32_t orig_id; /* PIN_GATE: the runtime program it stands in for */
};

struct attached {
	uint32_t ids[MAX_PROGS];
	uint32_t n;
	uint32_t flags;
};

static int query(int cgfd, bool effective, struct attached *ret);

static void devgate_destroyp(struct devgate **s)
{
	devgate__destroy(*s);
}

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

static int cg_dir(const struct bpfgate *bg, uint64_t cgid, char *buf, size_t len)
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

/* ROLE_MAPS creates or finds the shared maps; ROLE_PROGS loads gate and tally. */
enum role {
	ROLE_MAPS,
	ROLE_PROGS
};

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
#define SHARED_MAPS 5
static const char *const shared_names[SHARED_MAPS] = {
	"dg_grants_v1", "dg_counters_v1", "dg_events_v1", "dg_ratelim_v1", "dg_event_drops_v1",
};

/* The maps a live copy uses, so a new one adopts them instead of new ones. */
static int adopt_shared(struct devgate *skel, const int *fds)
{
	struct bpf_map *maps[SHARED_MAPS] = {
		skel->maps.dg_grants_v1,  skel->maps.dg_counters_v1,	skel->maps.dg_events_v1,
		skel->maps.dg_ratelim_v1, skel->maps.dg_event_drops_v1,
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

static int load_copy(const struct bpfgate *bg, enum role role, bool has_runtime,
		     enum bpf_attach_type gate_eat, struct devgate **ret)
{
	return load_copy_adopting(bg, role, has_runtime, gate_eat, NULL, ret);
}

static int load_copy_adopting(const struct bpfgate *bg, enum role role, bool has_runtime,
			      enum bpf_attach_type gate_eat, const int *adopt, struct devgate **ret)
{
	LIBBPF_OPTS(bpf_object_open_opts, opts, .pin_root_path = bg->pin_root);
	auto_cleanup(devgate_destroyp) struct devgate *skel = NULL;
	bool progs = role == ROLE_PROGS;
	int r;

	skel = devgate__open_opts(&opts);
	if (!skel)
		return errno > 0 ? -errno : -ENOMEM;
	skel->rodata->has_runtime = has_runtime;
	skel->rodata->nvidia_major = bg->nvidia_major;
	skel->rodata->uvm_major = bg->uvm_major;
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

/* Tells a copy which container it serves, and for which runtime program. */
static int set_self(struct devgate *skel, uint64_t cgid, uint32_t orig_id)
{
	struct dg_self me = { .cgroup_id = cgid, .orig_id = orig_id };
	uint32_t zero = 0;

	return bpf_map_update_elem(bpf_map__fd(skel->maps.self), &zero, &me, BPF_ANY) < 0 ? -errno
											  : 0;
}

void bpfgate_prepare(struct bpfgate *bg)
{
	int r;

	if (bg->spare)
		return;
	/* runc, crun and LXC load their programs with expected_attach_type 0. */
	r = load_copy(bg, ROLE_PROGS, true, 0, &bg->spare);
	if (r < 0)
		log_debug_errno(r, "cannot load a spare gate yet: %m");
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

		if (cgfds[i] < 0 || query(cgfds[i], false, &now) < 0)
			continue;
		for (uint32_t k = 0; k < now.n; k++) {
			if (maps_of(now.ids[k], fds))
				return true;
		}
	}
	return false;
}

int bpfgate_open(const char *pin_root, const struct dg_majors *majors, int cgroot_fd,
		 const int *leased_cgfds, size_t n_leased, struct bpfgate **ret,
		 struct dg_error *err)
{
	int adopt[SHARED_MAPS] = { -1, -1, -1, -1, -1 };
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
	bg->pin_root = strdup(pin_root);
	bg->nvidia_major = majors->has_nvidia ? majors->nvidia : 0;
	bg->uvm_major = majors->has_uvm ? majors->uvm : 0;
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
	const int fds[SHARED_MAPS] = { bg->grants_fd, bg->counters_fd, bg->events_fd,
				       bg->ratelimit_fd, bg->drops_fd };
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
	devgate__destroy(bg->spare);
	devgate__destroy(bg->maps);
	free(bg->pin_root);
	free(bg);
}

static struct dg_grant_key grant_key(uint64_t cgid, const struct dg_node *node)
{
	return (struct dg_grant_key){
		.cgroup_id = cgid,
		.type = DG_DEV_CHAR,
		.major = node->major,
		.minor = node->minor,
	};
}

int bpfgate_grant_put(struct bpfgate *bg, uint64_t cgid, const struct dg_node *node,
		      uint32_t access)
{
	struct dg_grant_key key = grant_key(cgid, node);
	struct dg_grant_val val = { .access = access };

	return bpf_map_update_elem(bg->grants_fd, &key, &val, BPF_ANY) < 0 ? -errno : 0;
}

int bpfgate_grant_del(struct bpfgate *bg, uint64_t cgid, const struct dg_node *node)
{
	struct dg_grant_key key = grant_key(cgid, node);

	if (bpf_map_delete_elem(bg->grants_fd, &key) < 0 && errno != ENOENT)
		return -errno;
	return 0;
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

static int query(int cgfd, bool effective, struct attached *ret)
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
static int read_pins(const char *dir, struct pinned *out, size_t max, size_t *ret_n)
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

static void unpin(const char *dir, const char *name)
{
	char path[PATH_MAX];

	if (pin_path(path, sizeof(path), dir, name) == 0 && unlink(path) < 0 && errno != ENOENT)
		log_warning_errno(errno, "cannot remove pin %s: %m", path);
}

static void unpin_one(const char *dir, const struct pinned *p)
{
	char name[64];

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
		r = load_copy(bg, ROLE_PROGS, true, eats[i], &skel);
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

	*o = (struct own_prog){ .kind = OWN_NONE };
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
static int unwrap_orphan(const struct keeper *k, int cgfd, uint32_t id, const struct own_prog *o,
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
	r = copy_for_wrap(bg, orig_fd, &skel);
	if (r == 0 && skel)
		r = set_self(skel, cgid, orig_id);
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
	/* The gate's slot ends with its pin: the kernel keeps orig for us here. */
	r = keeper_hold(&bg->keeper, orig_fd, orig_id);
	if (r < 0)
		log_warning_errno(r,
				  "cannot keep device program %u: %m (it lives as long as its pin)",
				  orig_id);
	log_debug("cgroup %llu: gate in place of device program %u", (unsigned long long)cgid,
		  orig_id);
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
	int r = load_copy(bg, ROLE_PROGS, false, BPF_CGROUP_DEVICE, &skel);

	if (r == 0)
		r = set_self(skel, cgid, 0);
	if (r < 0 || !skel)
		return dg_error_set(err, DG_E_KERNEL, r < 0 ? r : -EIO,
				    "cannot load devgate's default gate: %s", strerror(-r));
	r = attach_last(bpf_program__fd(skel->progs.devgate_gate), dir, cgfd, "gate-default", err);
	if (r == 0)
		keep_for_tally(&skel, tally_src);
	return r;
}

static int detach_pinned(const char *dir, const char *name, int cgfd)
{
	char path[PATH_MAX];
	auto_close int fd = -1;

	if (pin_path(path, sizeof(path), dir, name) < 0)
		return -ENAMETOOLONG;
	fd = bpf_obj_get(path);
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
	r = query(cgfd, false, &now);
	if (r < 0)
		return dg_error_set(err, DG_E_KERNEL, r, "cannot query device programs: %s",
				    strerror(-r));
	if (!(now.flags & BPF_F_ALLOW_MULTI))
		return 0; /* single-program cgroup: no room for a tally */
	if (tally && now.n && attached_has(&now, tally->id)) {
		char path[PATH_MAX];
		auto_close int fd = -1;

		if (now.ids[now.n - 1] == tally->id)
			return 0;
		/* A program attached after it: move the tally back to the end. */
		r = detach_pinned(dir, "tally", cgfd);
		if (r == 0)
			r = pin_path(path, sizeof(path), dir, "tally");
		if (r == 0)
			fd = bpf_obj_get(path);
		if (r == 0 && fd < 0)
			r = -errno;
		if (r == 0)
			r = attach(fd, cgfd, BPF_F_ALLOW_MULTI, -1);
		if (r < 0)
			return dg_error_set(err, DG_E_KERNEL, r, "cannot move the tally: %s",
					    strerror(-r));
		return 0;
	}
	if (!*tally_src) {
		r = load_copy(bg, ROLE_PROGS, true, 0, tally_src);
		if (r == 0 && *tally_src)
			r = set_self(*tally_src, cgid, 0);
		if (r < 0 || !*tally_src)
			return dg_error_set(err, DG_E_KERNEL, r < 0 ? r : -EIO,
					    "cannot load devgate's tally: %s", strerror(-r));
	}
	return attach_last(bpf_program__fd((*tally_src)->progs.devgate_tally), dir, cgfd, "tally",
			   err);
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
	if (query(cgfd, false, &now) == 0 && query(cgfd, true, &eff) == 0 && eff.n > now.n)
		gi->ancestor_progs = eff.n - now.n;
}

/* Pins and attached programs of a cgroup, after recovering lost pins. */
/*
 * A pinned gate whose slot is empty: the kernel clears a prog array when
 * its last pin or fd goes, and does it later, from a work queue, so a slot
 * refilled at once can be emptied again. Checked on every inspection.
 */
static void refill_pinned(uint64_t cgid, const char *dir, const struct pinned *pins, size_t n_pins)
{
	for (size_t i = 0; i < n_pins; i++) {
		char path[PATH_MAX], name[32];
		uint32_t zero = 0, held = 0;
		auto_close int map_fd = -1, orig_fd = -1;

		if (pins[i].kind != PIN_GATE)
			continue;
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
	int r = read_pins(dir, pins, MAX_PROGS, n_pins);

	if (r == 0)
		refill_pinned(cgid, dir, pins, *n_pins);
	if (r == 0)
		r = query(cgfd, false, now);
	if (r == 0)
		r = recover_pins(bg, cgid, dir, cgfd, pins, *n_pins, now);
	if (r > 0) /* something changed: look again */
		r = read_pins(dir, pins, MAX_PROGS, n_pins);
	if (r == 0)
		r = query(cgfd, false, now);
	return r;
}

int bpfgate_guard(struct bpfgate *bg, uint64_t cgid, int cgfd, struct guard_info *info,
		  struct dg_error *err)
{
	auto_cleanup(devgate_destroyp) struct devgate *tally_src = NULL;
	struct pinned pins[MAX_PROGS];
	struct attached now = { 0 };
	char dir[PATH_MAX];
	size_t n_pins = 0;
	struct guard_info gi = { 0 };
	int r;

	r = cg_dir(bg, cgid, dir, sizeof(dir));
	if (r < 0)
		return dg_error_set(err, DG_E_INTERNAL, r, "pin path too long");
	r = inspect(bg, cgid, dir, cgfd, pins, &n_pins, &now);
	if (r < 0)
		return dg_error_set(err, DG_E_KERNEL, r,
				    "cannot inspect the device programs of "
				    "cgroup %llu: %s",
				    (unsigned long long)cgid, strerror(-r));
	if (settled(pins, n_pins, &now)) { /* the common case: already gated */
		guard_summary(cgfd, pins, n_pins, &gi);
		if (info)
			*info = gi;
		return 0;
	}
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return dg_error_set(err, DG_E_KERNEL, errno, "cannot create %s: %m", dir);
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
	if (now.n == 0) {
		r = attach_default(bg, cgid, dir, cgfd, &tally_src, err);
		if (r < 0)
			return r;
	}
	r = read_pins(dir, pins, ARRAY_SIZE(pins), &n_pins);
	if (r == 0)
		r = place_tally(bg, cgid, dir, cgfd, pins, n_pins, &tally_src, err);
	if (r < 0)
		return r;
	r = read_pins(dir, pins, ARRAY_SIZE(pins), &n_pins);
	if (r == 0)
		guard_summary(cgfd, pins, n_pins, &gi);
	if (info)
		*info = gi;
	return 0;
}

int bpfgate_needs_guard(struct bpfgate *bg, uint64_t cgid, int cgfd)
{
	struct pinned pins[MAX_PROGS];
	struct attached now = { 0 };
	char dir[PATH_MAX];
	size_t n_pins = 0;
	int r;

	r = cg_dir(bg, cgid, dir, sizeof(dir));
	if (r == 0)
		r = inspect(bg, cgid, dir, cgfd, pins, &n_pins, &now);
	if (r < 0)
		return r;
	return !settled(pins, n_pins, &now);
}

/* Puts runtime program orig back in place of gate pinned as gate-ORIG. */
static int restore(const char *dir, int cgfd, const struct pinned *p, uint32_t cg_flags)
{
	auto_close int orig_fd = -1, gate_fd = -1;
	char path[PATH_MAX], name[32];
	bool multi = cg_flags & BPF_F_ALLOW_MULTI;
	int r;

	snprintf(name, sizeof(name), "gate-%u", p->orig_id);
	r = pin_path(path, sizeof(path), dir, name);
	if (r < 0)
		return r;
	gate_fd = bpf_obj_get(path);
	if (gate_fd < 0)
		return -errno;
	/* The slot still holds orig, so it cannot have been freed. */
	orig_fd = bpf_prog_get_fd_by_id(p->orig_id);
	if (orig_fd < 0)
		return -errno;
	return attach(orig_fd, cgfd, multi ? BPF_F_ALLOW_MULTI : cg_flags, multi ? gate_fd : -1);
}

static int unguard_attached(const char *dir, int cgfd, const struct pinned *pins, size_t n_pins,
			    uint64_t cgid, struct dg_error *err)
{
	struct attached now = { 0 };
	int r = query(cgfd, false, &now);

	if (r < 0)
		return dg_error_set(err, DG_E_KERNEL, r,
				    "cannot query device programs of cgroup "
				    "%llu: %s",
				    (unsigned long long)cgid, strerror(-r));
	/* Runtime programs first, so the cgroup is never left unfiltered. */
	for (size_t i = 0; i < n_pins; i++) {
		if (pins[i].kind != PIN_GATE || !attached_has(&now, pins[i].id))
			continue;
		r = restore(dir, cgfd, &pins[i], now.flags);
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
		r = detach_pinned(dir, name, cgfd);
		if (r < 0)
			return dg_error_set(err, DG_E_KERNEL, r,
					    "cannot detach %s from cgroup "
					    "%llu: %s",
					    name, (unsigned long long)cgid, strerror(-r));
	}
	return 0;
}

int bpfgate_unguard(struct bpfgate *bg, uint64_t cgid, int cgfd, struct dg_error *err)
{
	struct pinned pins[MAX_PROGS];
	char dir[PATH_MAX];
	size_t n_pins = 0;
	auto_closedir DIR *d = NULL;
	struct dirent *de;
	int r;

	r = cg_dir(bg, cgid, dir, sizeof(dir));
	if (r == 0 && cgfd >= 0) {
		struct attached now = { 0 };

		/* Lost pins first: what is ours is found on the cgroup itself. */
		r = inspect(bg, cgid, dir, cgfd, pins, &n_pins, &now);
	} else if (r == 0) {
		r = read_pins(dir, pins, ARRAY_SIZE(pins), &n_pins);
	}
	if (r < 0)
		return dg_error_set(err, DG_E_KERNEL, r, "cannot read pins of cgroup %llu: %s",
				    (unsigned long long)cgid, strerror(-r));
	if (cgfd >= 0) {
		r = unguard_attached(dir, cgfd, pins, n_pins, cgid, err);
		if (r < 0)
			return r;
	}
	/* The runtime programs are back on their cgroup, or it is gone: let go. */
	for (size_t i = 0; i < n_pins; i++) {
		if (pins[i].kind == PIN_GATE)
			keeper_release(&bg->keeper, pins[i].orig_id);
	}
	d = opendir(dir);
	while (d && (de = readdir(d))) {
		if (de->d_name[0] != '.')
			unpin(dir, de->d_name);
	}
	if (rmdir(dir) < 0 && errno != ENOENT)
		log_warning_errno(errno, "cannot remove %s: %m", dir);
	return 0;
}

int bpfgate_guarded_list(struct bpfgate *bg, uint64_t **ret, size_t *ret_n)
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
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			uint64_t *nids = realloc(ids, ncap * sizeof(*ids));

			if (!nids)
				return -ENOMEM;
			ids = nids;
			cap = ncap;
		}
		ids[n++] = id;
	}
	*ret = TAKE_PTR(ids);
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

		for (uint16_t acc = 1; acc <= (DG_ACC_MKNOD | DG_ACC_READ | DG_ACC_WRITE); acc++) {
			struct dg_count_key k = {
				.cgroup_id = cgid,
				.major = nodes[i].major,
				.minor = nodes[i].minor,
				.type = DG_DEV_CHAR,
				.access = acc,
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
