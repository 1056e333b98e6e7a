// SPDX-License-Identifier: Apache-2.0
/*
 * Leases and the lease table: what one container holds (GPUs, MIG
 * instances, host devices, driver files, GPU time) and the table of all of
 * them, indexed by cgroup id and counting the holders of each GPU. Also the
 * device nodes a lease grants, its label and the arithmetic of expiries.
 * Plain data: nothing here makes a system call, reads the state directory
 * (record.c and state.c do) or logs. The one outside input is the clock:
 * lease_add_gpu and lease_del_gpu start and end GPU time at the current time.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "array.h"
#include "cleanup.h"
#include "devgate.h"
#include "lease.h"
#include "util.h"

struct lease *lease_new(uint64_t cgid)
{
	struct lease *l = calloc(1, sizeof(*l));

	if (!l)
		return NULL;
	l->cgid = cgid;
	l->watch = -1;
	return l;
}

void lease_free(struct lease *l)
{
	if (!l)
		return;
	free(l->gpus);
	free(l->spent);
	free(l->devices);
	free(l->cgroup);
	free(l->container);
	free(l->runtime);
	free(l->driver_files);
	free(l->driver_dirs);
	free(l->root);
	free(l->kept);
	free(l->cg1_path);
	free(l->cg1_added);
	free(l);
}

/* Sets *ret to a copy of the n elements of size size at src (NULL for none). 0 or -ENOMEM. */
static int dup_array(const void *src, size_t n, size_t size, void **ret)
{
	*ret = n ? malloc(n * size) : NULL;
	if (n && !*ret)
		return -ENOMEM;
	if (n)
		memcpy(*ret, src, n * size);
	return 0;
}

/* Sets *ret to a copy of s, or to NULL when s is NULL. Returns 0 or -ENOMEM. */
static int dup_str(const char *s, char **ret)
{
	*ret = NULL;
	if (!s)
		return 0;
	*ret = strdup(s);
	return *ret ? 0 : -ENOMEM;
}

struct lease *lease_copy(const struct lease *l)
{
	struct lease *c = lease_new(l->cgid);

	if (!c)
		return NULL;
	c->pid = l->pid;
	c->since = l->since;
	c->expires = l->expires;
	c->kill_on_expiry = l->kill_on_expiry;
	c->v1_keyed = l->v1_keyed;
	c->driver_caps = l->driver_caps;
	c->has_majors = l->has_majors;
	c->majors = l->majors;
	if (l->n_gpus) {
		c->gpus = malloc(l->n_gpus * sizeof(*c->gpus));
		if (!c->gpus) {
			lease_free(c);
			return NULL;
		}
		memcpy(c->gpus, l->gpus, l->n_gpus * sizeof(*c->gpus));
		c->n_gpus = l->n_gpus;
	}
	if (l->n_spent) {
		c->spent = malloc(l->n_spent * sizeof(*c->spent));
		if (!c->spent) {
			lease_free(c);
			return NULL;
		}
		memcpy(c->spent, l->spent, l->n_spent * sizeof(*c->spent));
		c->n_spent = l->n_spent;
	}
	if (l->n_devices) {
		c->devices = malloc(l->n_devices * sizeof(*c->devices));
		if (!c->devices) {
			lease_free(c);
			return NULL;
		}
		memcpy(c->devices, l->devices, l->n_devices * sizeof(*c->devices));
		c->n_devices = l->n_devices;
	}
	c->n_driver_files = l->n_driver_files;
	c->n_driver_dirs = l->n_driver_dirs;
	c->n_kept = l->n_kept;
	c->n_cg1_added = l->n_cg1_added;
	c->root_dev = l->root_dev;
	c->root_ino = l->root_ino;
	c->proof_fp = l->proof_fp;
	if (dup_array(l->driver_files, l->n_driver_files, sizeof(*l->driver_files),
		      (void **)&c->driver_files) < 0 ||
	    dup_array(l->driver_dirs, l->n_driver_dirs, sizeof(*l->driver_dirs),
		      (void **)&c->driver_dirs) < 0 ||
	    dup_array(l->kept, l->n_kept, sizeof(*l->kept), (void **)&c->kept) < 0 ||
	    dup_array(l->cg1_added, l->n_cg1_added, sizeof(*l->cg1_added), (void **)&c->cg1_added) <
		    0 ||
	    dup_str(l->cg1_path, &c->cg1_path) < 0 || dup_str(l->cgroup, &c->cgroup) < 0 ||
	    dup_str(l->container, &c->container) < 0 || dup_str(l->runtime, &c->runtime) < 0 ||
	    dup_str(l->root, &c->root) < 0) {
		lease_free(c);
		return NULL;
	}
	return c;
}

/*
 * The index makes a lookup by cgroup id O(1): with 10,000 leases a walk of
 * the table on every request was most of a grant's own CPU time.
 */
/* Returns the slot where the search for cgid starts. */
static size_t index_home(const struct lease_table *t, uint64_t cgid)
{
	return (size_t)((cgid * 0x9E3779B97F4A7C15ull) >> 32) & (t->n_index - 1);
}

/* Enters the lease at position pos of t->v into the index. */
static void index_put(struct lease_table *t, size_t pos)
{
	size_t h = index_home(t, t->v[pos]->cgid);

	while (t->index[h])
		h = (h + 1) & (t->n_index - 1);
	t->index[h] = (uint32_t)(pos + 1);
}

/*
 * Replaces the index with one at most half full when the table holds want
 * leases, and enters every lease. Returns 0, or -ENOMEM with the old index kept.
 */
static int index_rebuild(struct lease_table *t, size_t want)
{
	size_t n_index = 64;
	uint32_t *index;

	while (n_index < want * 2)
		n_index <<= 1;
	index = calloc(n_index, sizeof(*index));
	if (!index)
		return -ENOMEM;
	free(t->index);
	t->index = index;
	t->n_index = n_index;
	for (size_t i = 0; i < t->n; i++)
		index_put(t, i);
	return 0;
}

/* Returns the index slot that holds cgid, or SIZE_MAX when the table has no such lease. */
static size_t index_slot(const struct lease_table *t, uint64_t cgid)
{
	if (!t->n_index)
		return SIZE_MAX;
	for (size_t h = index_home(t, cgid); t->index[h]; h = (h + 1) & (t->n_index - 1)) {
		if (t->v[t->index[h] - 1]->cgid == cgid)
			return h;
	}
	return SIZE_MAX;
}

/*
 * Empties index slot i and moves back the entries of its probe run, so that
 * lookups need no tombstones.
 */
static void index_del(struct lease_table *t, size_t i)
{
	size_t mask = t->n_index - 1, j = i;

	for (;;) {
		size_t k;

		j = (j + 1) & mask;
		if (!t->index[j])
			break;
		k = index_home(t, t->v[t->index[j] - 1]->cgid);
		/* Entry j may fill hole i only if its home is not in (i, j]. */
		if ((j > i && (k <= i || k > j)) || (j < i && k <= i && k > j)) {
			t->index[i] = t->index[j];
			i = j;
		}
	}
	t->index[i] = 0;
}

/*
 * Returns the counts of the whole GPU uuid, or with instance those of its MIG
 * instance gi; NULL when no lease ever held it.
 */
static struct lease_use *use_find(const struct lease_table *t, const char *uuid, bool instance,
				  uint32_t gi)
{
	for (size_t i = 0; i < t->n_use; i++) {
		const struct lease_use *u = &t->use[i];

		if (u->instance == instance && (!instance || u->gi == gi) &&
		    strcasecmp(u->uuid, uuid) == 0)
			return &t->use[i];
	}
	return NULL;
}

/* Makes room for the counts l's GPUs may need, so that counting l cannot fail. */
static int use_reserve(struct lease_table *t, const struct lease *l)
{
	return array_reserve((void **)&t->use, &t->cap_use, t->n_use + l->n_gpus, sizeof(*t->use));
}

/*
 * Counts g, a GPU of l, as held, and remembers l as one of the two holders
 * that messages name. use_reserve made the room a new count needs.
 */
static void use_hold(struct lease_table *t, const struct lease *l, const struct lease_gpu *g)
{
	struct lease_use *u = use_find(t, g->uuid, g->instance, g->gi);
	const struct lease **who;

	if (!u) {
		u = &t->use[t->n_use++];
		*u = (struct lease_use){ .instance = g->instance, .gi = g->gi };
		snprintf(u->uuid, sizeof(u->uuid), "%s", g->uuid);
	}
	*(g->shared ? &u->n_shared : &u->n_exclusive) += 1;
	who = g->shared ? u->shared : u->exclusive;
	if (!who[0])
		who[0] = l;
	else if (!who[1])
		who[1] = l;
}

/* Counts g, a GPU of l, as no longer held, and forgets l as a holder to name. */
static void use_drop(struct lease_table *t, const struct lease *l, const struct lease_gpu *g)
{
	struct lease_use *u = use_find(t, g->uuid, g->instance, g->gi);
	const struct lease **who;

	if (!u)
		return;
	*(g->shared ? &u->n_shared : &u->n_exclusive) -= 1;
	who = g->shared ? u->shared : u->exclusive;
	for (int i = 0; i < 2; i++) {
		if (who[i] == l)
			who[i] = NULL;
	}
}

int lease_table_add(struct lease_table *t, struct lease *l)
{
	/* NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers, as meant */
	if (ARRAY_GROW(t->v, t->n, t->cap) < 0 || use_reserve(t, l) < 0)
		return -ENOMEM;
	if ((t->n + 1) * 2 > t->n_index && index_rebuild(t, t->n + 1) < 0)
		return -ENOMEM;
	t->v[t->n] = l;
	index_put(t, t->n++);
	for (size_t i = 0; i < l->n_gpus; i++)
		use_hold(t, l, &l->gpus[i]);
	return 0;
}

const struct lease_use *lease_table_use(const struct lease_table *t, const char *uuid)
{
	return use_find(t, uuid, false, 0);
}

const struct lease_use *lease_table_use_gi(const struct lease_table *t, const char *uuid,
					   uint32_t gi)
{
	return use_find(t, uuid, true, gi);
}

const struct lease *lease_table_instance_holder(const struct lease_table *t, const char *uuid,
						uint64_t skip_cgid, uint32_t *ret_gi)
{
	for (size_t i = 0; i < t->n_use; i++) {
		const struct lease_use *u = &t->use[i];
		const struct lease *who;

		if (!u->instance || u->n_exclusive == 0 || strcasecmp(u->uuid, uuid) != 0)
			continue;
		who = lease_table_holder(t, u, false, skip_cgid);
		if (who) {
			*ret_gi = u->gi;
			return who;
		}
	}
	return NULL;
}

const struct lease *lease_table_holder(const struct lease_table *t, const struct lease_use *u,
				       bool shared, uint64_t skip_cgid)
{
	const struct lease *const *who = shared ? u->shared : u->exclusive;

	for (int i = 0; i < 2; i++) {
		if (who[i] && who[i]->cgid != skip_cgid)
			return who[i];
	}
	for (size_t i = 0; i < t->n; i++) {
		const struct lease_gpu *g = lease_find_gpu(t->v[i], u->uuid);

		if (g && g->shared == shared && g->instance == u->instance &&
		    (!u->instance || g->gi == u->gi) && t->v[i]->cgid != skip_cgid)
			return t->v[i];
	}
	return NULL;
}

void lease_table_del_gpu(struct lease_table *t, struct lease *l, const char *uuid)
{
	const struct lease_gpu *g = lease_find_gpu(l, uuid);

	if (!g)
		return;
	use_drop(t, l, g);
	lease_del_gpu(l, uuid);
}

struct lease *lease_table_find(const struct lease_table *t, uint64_t cgid)
{
	size_t h = index_slot(t, cgid);

	return h == SIZE_MAX ? NULL : t->v[t->index[h] - 1];
}

uint64_t *lease_table_ids(const struct lease_table *t)
{
	uint64_t *ids = malloc((t->n + 1) * sizeof(*ids));

	for (size_t i = 0; ids && i < t->n; i++)
		ids[i] = t->v[i]->cgid;
	return ids;
}

int lease_table_find_label(const struct lease_table *t, const char *label, struct lease **ret)
{
	struct lease *hit = NULL;

	*ret = NULL;
	for (size_t i = 0; i < t->n; i++) {
		if (!t->v[i]->container || strcmp(t->v[i]->container, label) != 0)
			continue;
		if (hit)
			return -EEXIST;
		hit = t->v[i];
	}
	*ret = hit;
	return hit ? 0 : -ENOENT;
}

struct lease *lease_table_take(struct lease_table *t, uint64_t cgid)
{
	size_t h = index_slot(t, cgid), pos;
	struct lease *l;

	if (h == SIZE_MAX)
		return NULL;
	pos = t->index[h] - 1;
	l = t->v[pos];
	for (size_t i = 0; i < l->n_gpus; i++)
		use_drop(t, l, &l->gpus[i]);
	index_del(t, h);
	if (pos != t->n - 1) {
		/* The last lease takes the freed place. */
		h = index_slot(t, t->v[t->n - 1]->cgid);
		t->v[pos] = t->v[t->n - 1];
		t->index[h] = (uint32_t)(pos + 1);
	}
	t->n--;
	return l;
}

void lease_table_clear(struct lease_table *t)
{
	for (size_t i = 0; i < t->n; i++)
		lease_free(t->v[i]);
	free(t->v);
	free(t->index);
	free(t->use);
	*t = (struct lease_table){ 0 };
}

const struct lease_gpu *lease_find_gpu(const struct lease *l, const char *uuid)
{
	for (size_t i = 0; i < l->n_gpus; i++) {
		if (strcasecmp(l->gpus[i].uuid, uuid) == 0)
			return &l->gpus[i];
	}
	return NULL;
}

/*
 * Returns a new zeroed GPU at the end of l->gpus, or NULL when l holds
 * DG_MAX_GPUS or memory ran out.
 */
static struct lease_gpu *gpu_slot(struct lease *l)
{
	struct lease_gpu *v;

	if (l->n_gpus == DG_MAX_GPUS)
		return NULL;
	v = realloc(l->gpus, (l->n_gpus + 1) * sizeof(*v));
	if (!v)
		return NULL;
	l->gpus = v;
	/* Zeroed: what the caller does not set (card, MIG instance) is off. */
	memset(&l->gpus[l->n_gpus], 0, sizeof(*v));
	return &l->gpus[l->n_gpus++];
}

/* Returns the GPU time l keeps of GPU uuid, which left it, or NULL. */
static struct lease_spent *find_spent(const struct lease *l, const char *uuid)
{
	for (size_t i = 0; i < l->n_spent; i++) {
		if (strcasecmp(l->spent[i].uuid, uuid) == 0)
			return &l->spent[i];
	}
	return NULL;
}

int lease_add_instance(struct lease *l, const struct dg_gpu *gpu, const struct dg_mig_gi *gi)
{
	struct lease_gpu *g;
	int r = lease_add_gpu(l, gpu, false);

	if (r <= 0)
		return r;
	g = &l->gpus[l->n_gpus - 1];
	g->instance = true;
	g->gi = gi->id;
	g->caps[g->n_caps++] = gi->minor;
	for (size_t i = 0; i < gi->n_ci && g->n_caps < DG_MAX_CAPS; i++)
		g->caps[g->n_caps++] = gi->ci[i].minor;
	return 1;
}

int lease_add_gpu(struct lease *l, const struct dg_gpu *gpu, bool shared)
{
	struct lease_spent *sp;
	struct lease_gpu *g;

	if (lease_find_gpu(l, gpu->uuid))
		return 0;
	g = gpu_slot(l);
	if (!g)
		return l->n_gpus == DG_MAX_GPUS ? -E2BIG : -ENOMEM;
	snprintf(g->uuid, sizeof(g->uuid), "%s", gpu->uuid);
	g->family = gpu->family;
	g->minor = gpu->minor;
	g->shared = shared;
	g->since_ms = now_wall_ms();
	g->ms = 0;
	sp = find_spent(l, gpu->uuid);
	if (sp) {
		g->ms = sp->ms;
		*sp = l->spent[--l->n_spent];
	}
	return 1;
}

/* Returns g's GPU time up to now_ms: its earlier spans and the one going on. */
static int64_t span_ms(const struct lease_gpu *g, int64_t now_ms)
{
	return g->ms + (now_ms > g->since_ms ? now_ms - g->since_ms : 0);
}

/*
 * Keeps ms of GPU time of uuid, a GPU that left l. Without memory for it
 * the time is lost, never the grant.
 */
static void add_spent(struct lease *l, const char *uuid, int64_t ms)
{
	struct lease_spent *v;

	if (l->n_spent == DG_MAX_GPUS)
		return;
	v = realloc(l->spent, (l->n_spent + 1) * sizeof(*v));
	if (!v)
		return;
	l->spent = v;
	snprintf(v[l->n_spent].uuid, sizeof(v->uuid), "%s", uuid);
	v[l->n_spent++].ms = ms;
}

void lease_gpu_add_card(struct lease *l, const struct dg_gpu *gpu)
{
	for (size_t i = 0; i < l->n_gpus; i++) {
		struct lease_gpu *g = &l->gpus[i];

		if (strcasecmp(g->uuid, gpu->uuid) == 0 && gpu->has_card &&
		    gpu->family != DG_VENDOR_NVIDIA) {
			g->card = true;
			g->card_minor = gpu->card_minor;
		}
	}
}

void lease_del_gpu(struct lease *l, const char *uuid)
{
	for (size_t i = 0; i < l->n_gpus; i++) {
		if (strcasecmp(l->gpus[i].uuid, uuid) == 0) {
			add_spent(l, l->gpus[i].uuid, span_ms(&l->gpus[i], now_wall_ms()));
			l->gpus[i] = l->gpus[--l->n_gpus];
			return;
		}
	}
}

int64_t lease_gpu_ms(const struct lease *l, const char *uuid, int64_t now_ms)
{
	const struct lease_gpu *g = lease_find_gpu(l, uuid);
	const struct lease_spent *sp = g ? NULL : find_spent(l, uuid);

	return g ? span_ms(g, now_ms) : sp ? sp->ms : 0;
}

int64_t lease_total_ms(const struct lease *l, int64_t now_ms)
{
	int64_t ms = 0;

	for (size_t i = 0; i < l->n_gpus; i++)
		ms += span_ms(&l->gpus[i], now_ms);
	for (size_t i = 0; i < l->n_spent; i++)
		ms += l->spent[i].ms;
	return ms;
}

bool lease_holds(const struct lease *l)
{
	return l->n_gpus > 0 || l->n_devices > 0;
}

const struct lease_device *lease_find_device(const struct lease *l, const char *path)
{
	const char *name = strncmp(path, "/dev/", 5) == 0 ? path + 5 : NULL;

	for (size_t i = 0; i < l->n_devices; i++) {
		if ((name && strcmp(l->devices[i].name, name) == 0) ||
		    strcmp(l->devices[i].host, path) == 0)
			return &l->devices[i];
	}
	return NULL;
}

void lease_driver_clear(struct lease *l)
{
	l->driver_caps = 0;
	free(l->driver_files);
	l->driver_files = NULL;
	l->n_driver_files = 0;
	free(l->driver_dirs);
	l->driver_dirs = NULL;
	l->n_driver_dirs = 0;
}

int lease_add_driver_file(struct lease *l, const char *path)
{
	struct lease_file *v = realloc(l->driver_files, (l->n_driver_files + 1) * sizeof(*v));

	if (!v)
		return -ENOMEM;
	l->driver_files = v;
	snprintf(v[l->n_driver_files++].path, sizeof(v->path), "%s", path);
	return 0;
}

int lease_add_driver_dir(struct lease *l, const char *path, uint64_t ino)
{
	struct lease_dir *v = realloc(l->driver_dirs, (l->n_driver_dirs + 1) * sizeof(*v));

	if (!v)
		return -ENOMEM;
	l->driver_dirs = v;
	snprintf(v[l->n_driver_dirs].path, sizeof(v->path), "%s", path);
	v[l->n_driver_dirs++].ino = ino;
	return 0;
}

bool lease_node_kept(const struct lease *l, const char *name)
{
	for (size_t i = 0; i < l->n_kept; i++) {
		if (strncmp(l->kept[i].path, "/dev/", 5) == 0 &&
		    strcmp(l->kept[i].path + 5, name) == 0)
			return true;
	}
	return false;
}

int lease_keep_nodes(struct lease *l, const struct dg_node *nodes, const bool *keep, size_t n)
{
	struct lease_kept *v = n ? calloc(n, sizeof(*v)) : NULL;
	size_t k = 0;
	bool same;

	if (n && !v)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		if (keep[i])
			snprintf(v[k++].path, sizeof(v->path), "/dev/%s", nodes[i].name);
	}
	same = k == l->n_kept;
	for (size_t i = 0; same && i < k; i++)
		same = strcmp(v[i].path, l->kept[i].path) == 0;
	free(l->kept);
	l->kept = k ? v : NULL;
	l->n_kept = k;
	if (!k)
		free(v);
	return same ? 0 : 1;
}

int lease_set_root(struct lease *l, const char *path, uint64_t dev, uint64_t ino)
{
	char *p = NULL;

	if (dup_str(path, &p) < 0)
		return -ENOMEM;
	free(l->root);
	l->root = p;
	l->root_dev = path ? dev : 0;
	l->root_ino = path ? ino : 0;
	return 0;
}

int lease_access_parse(const char *s, uint32_t *ret)
{
	uint32_t acc = 0;

	for (const char *p = s; *p; p++) {
		uint32_t bit = *p == 'r'   ? DG_ACC_READ
			       : *p == 'w' ? DG_ACC_WRITE
			       : *p == 'm' ? DG_ACC_MKNOD
					   : 0;

		if (!bit || (acc & bit))
			return -EINVAL;
		acc |= bit;
	}
	if (!acc)
		return -EINVAL;
	*ret = acc;
	return 0;
}

int lease_add_device(struct lease *l, const struct lease_device *dev)
{
	struct lease_device *v;

	for (size_t i = 0; i < l->n_devices; i++) {
		const struct lease_device *o = &l->devices[i];
		bool same_name = strcmp(o->name, dev->name) == 0;
		bool same_dev = o->major == dev->major && o->minor == dev->minor &&
				o->block == dev->block;

		/* The same device again: only its access may change. */
		if (same_name && same_dev) {
			if (o->access == dev->access)
				return 0;
			l->devices[i].access = dev->access;
			return 1;
		}
		if (same_name || same_dev)
			return -EEXIST;
	}
	if (l->n_devices == DG_MAX_DEVICES)
		return -E2BIG;
	v = realloc(l->devices, (l->n_devices + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	l->devices = v;
	l->devices[l->n_devices++] = *dev;
	return 1;
}

void lease_del_device(struct lease *l, const char *name)
{
	for (size_t i = 0; i < l->n_devices; i++) {
		if (strcmp(l->devices[i].name, name) == 0) {
			/* Keep the order: the records and replies list them as granted. */
			memmove(&l->devices[i], &l->devices[i + 1],
				(l->n_devices - i - 1) * sizeof(*l->devices));
			l->n_devices--;
			return;
		}
	}
}

/* Appends l's devices to out, which holds n of max nodes, and returns the new count. */
static size_t device_nodes(const struct lease *l, struct dg_node *out, size_t n, size_t max)
{
	for (size_t i = 0; i < l->n_devices && n < max; i++) {
		struct dg_node *node = &out[n++];

		*node = (struct dg_node){
			.major = l->devices[i].major,
			.minor = l->devices[i].minor,
			.access = l->devices[i].access,
			.block = l->devices[i].block,
		};
		snprintf(node->name, sizeof(node->name), "%s", l->devices[i].name);
	}
	return n;
}

/*
 * A whole GPU in MIG mode is all of its instances: without their capability
 * nodes CUDA finds no device on it (seen on an H200: cuInit gives
 * CUDA_ERROR_NO_DEVICE). Taken from the inventory, as the instances are now.
 */
static size_t whole_mig_nodes(const struct lease_gpu *g, const struct dg_inventory *inv,
			      struct dg_node *out, size_t max)
{
	const struct dg_gpu *gpu = g->family == DG_VENDOR_NVIDIA ? inventory_find_uuid(inv, g->uuid)
								 : NULL;
	size_t n = 0;

	if (!gpu || !gpu->mig || !inv->majors.has_caps)
		return 0;
	for (size_t k = 0; k < gpu->n_gi && n < max; k++) {
		mig_cap_node(inv, gpu->gi[k].minor, &out[n++]);
		for (size_t c = 0; c < gpu->gi[k].n_ci && n < max; c++)
			mig_cap_node(inv, gpu->gi[k].ci[c].minor, &out[n++]);
	}
	return n;
}

size_t lease_gpu_nodes(const struct lease_gpu *g, const struct dg_inventory *inv,
		       struct dg_node *out, size_t max)
{
	size_t n = 0;

	if (max == 0)
		return 0;
	vendor_gpu_node(inv, g->family, g->minor, &out[n++]);
	if (g->card && n < max)
		card_node(g->card_minor, &out[n++]);
	for (size_t c = 0; g->instance && c < g->n_caps && n < max; c++)
		mig_cap_node(inv, g->caps[c], &out[n++]);
	if (!g->instance)
		n += whole_mig_nodes(g, inv, out + n, max - n);
	return n;
}

size_t lease_nodes(const struct lease *l, const struct dg_inventory *inv, struct dg_node *out,
		   size_t max)
{
	size_t n = 0;

	bool vendors[DG_VENDORS] = { false };

	for (size_t i = 0; i < l->n_gpus && n < max; i++) {
		n += lease_gpu_nodes(&l->gpus[i], inv, out + n, max - n);
		vendors[l->gpus[i].family] = true;
	}
	/* Each vendor's control nodes, for the vendors the lease holds GPUs of. */
	for (size_t i = 0; i < inv->n_ctl && n < max; i++) {
		if (vendors[inv->ctl_vendor[i]])
			out[n++] = inv->ctl[i];
	}
	return device_nodes(l, out, n, max);
}

const char *lease_devices_note(size_t n, char *buf, size_t len)
{
	buf[0] = '\0';
	if (n)
		snprintf(buf, len, " and %zu device(s)", n);
	return buf;
}

char *lease_label_from_cgroup(const char *cgroup)
{
	static const char *const prefixes[] = { "docker-", "libpod-", "crio-", "cri-containerd-" };
	const char *base = strrchr(cgroup, '/');
	size_t len;

	base = base ? base + 1 : cgroup;
	for (size_t i = 0; i < ARRAY_SIZE(prefixes); i++) {
		if (strncmp(base, prefixes[i], strlen(prefixes[i])) == 0 &&
		    base[strlen(prefixes[i])]) {
			base += strlen(prefixes[i]);
			break;
		}
	}
	len = strlen(base);
	if (len > 6 && strcmp(base + len - 6, ".scope") == 0)
		len -= 6;
	return len ? strndup(base, len) : NULL;
}

int lease_expiry_new(int64_t now, int64_t ttl, int64_t *ret)
{
	if (ttl <= 0 || ttl > DURATION_MAX_S || now < 0)
		return -ERANGE;
	*ret = now + ttl;
	return 0;
}

int lease_expiry_extend(int64_t expires, int64_t now, int64_t by, int64_t *ret)
{
	int64_t base = expires > now ? expires : now;

	if (expires <= 0)
		return -ENOENT;
	if (by <= 0 || by > DURATION_MAX_S || base - now > DURATION_MAX_S - by)
		return -ERANGE;
	*ret = base + by;
	return 0;
}

int64_t lease_expiry_left(const struct lease *l, int64_t now)
{
	if (l->expires <= 0)
		return -1;
	return l->expires > now ? l->expires - now : 0;
}

int64_t lease_table_next_expiry(const struct lease_table *t)
{
	int64_t next = 0;

	for (size_t i = 0; i < t->n; i++) {
		int64_t e = t->v[i]->expires;

		if (e > 0 && (next == 0 || e < next))
			next = e;
	}
	return next;
}

const char *lease_label(const struct lease *l)
{
	return l->container ? l->container : l->cgroup;
}

struct lease *lease_minus(const struct lease *old, const struct lease *next)
{
	struct lease *g = lease_copy(old);

	for (size_t i = 0; g && i < old->n_gpus; i++) {
		if (lease_find_gpu(next, old->gpus[i].uuid))
			lease_del_gpu(g, old->gpus[i].uuid);
	}
	for (size_t i = 0; g && i < old->n_devices; i++) {
		char path[40];

		snprintf(path, sizeof(path), "/dev/%s", old->devices[i].name);
		if (lease_find_device(next, path))
			lease_del_device(g, old->devices[i].name);
	}
	return g;
}
