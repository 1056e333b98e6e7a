// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "array.h"
#include "cleanup.h"
#include "devgate.h"
#include "driver.h"
#include "jsonutil.h"
#include "lease.h"
#include "util.h"

#define LEASE_FORMAT 1

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
	free(l->driver_files);
	free(l);
}

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
	if (l->n_driver_files) {
		c->driver_files = malloc(l->n_driver_files * sizeof(*c->driver_files));
		if (!c->driver_files) {
			lease_free(c);
			return NULL;
		}
		memcpy(c->driver_files, l->driver_files,
		       l->n_driver_files * sizeof(*c->driver_files));
		c->n_driver_files = l->n_driver_files;
	}
	if (dup_str(l->cgroup, &c->cgroup) < 0 || dup_str(l->container, &c->container) < 0) {
		lease_free(c);
		return NULL;
	}
	return c;
}

/*
 * The index makes a lookup by cgroup id O(1): with 10,000 leases a walk of
 * the table on every request was most of a grant's own CPU time.
 */
static size_t index_home(const struct lease_table *t, uint64_t cgid)
{
	return (size_t)((cgid * 0x9E3779B97F4A7C15ull) >> 32) & (t->n_index - 1);
}

static void index_put(struct lease_table *t, size_t pos)
{
	size_t h = index_home(t, t->v[pos]->cgid);

	while (t->index[h])
		h = (h + 1) & (t->n_index - 1);
	t->index[h] = (uint32_t)(pos + 1);
}

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

/* The index slot that holds cgid, or SIZE_MAX. */
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

/* Empties slot i, moving back the entries of its probe run (no tombstones). */
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

/* The count of the whole GPU uuid, or (instance) of its MIG instance gi. */
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

/* Room for the entries l's GPUs need, so that counting it cannot fail. */
static int use_reserve(struct lease_table *t, const struct lease *l)
{
	return array_reserve((void **)&t->use, &t->cap_use, t->n_use + l->n_gpus, sizeof(*t->use));
}

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

/* Room for one more GPU at the end of l->gpus. */
static struct lease_gpu *gpu_slot(struct lease *l)
{
	struct lease_gpu *v;

	if (l->n_gpus == DG_MAX_GPUS)
		return NULL;
	v = realloc(l->gpus, (l->n_gpus + 1) * sizeof(*v));
	if (!v)
		return NULL;
	l->gpus = v;
	/* Zeroed: fields a record leaves out (vendor, card) read as their defaults. */
	memset(&l->gpus[l->n_gpus], 0, sizeof(*v));
	return &l->gpus[l->n_gpus++];
}

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

/* A GPU back in the lease carries on from the time it had. */
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

static int64_t span_ms(const struct lease_gpu *g, int64_t now_ms)
{
	return g->ms + (now_ms > g->since_ms ? now_ms - g->since_ms : 0);
}

/* Without memory for it, a GPU's spent time is lost, never its grant. */
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
	for (uint32_t c = 0; g->instance && c < g->n_caps && n < max; c++)
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

/* A MIG instance: "gi" and its capability minors "caps"; absent for a whole GPU. */
static void instance_to_json(json_object *g, const struct lease_gpu *lg)
{
	json_object *caps = json_object_new_array();

	json_object_object_add(g, "gi", json_object_new_int64(lg->gi));
	for (uint32_t c = 0; c < lg->n_caps; c++)
		json_object_array_add(caps, json_object_new_int64(lg->caps[c]));
	json_object_object_add(g, "caps", caps);
}

static int instance_from_json(json_object *g, struct lease_gpu *lg, char *why, size_t len)
{
	json_object *v, *caps;
	size_t n;

	if (!json_object_object_get_ex(g, "gi", &v))
		return 0;
	if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 0 ||
	    json_object_get_int64(v) >= 1 << 16 || lg->family != DG_VENDOR_NVIDIA ||
	    !json_object_object_get_ex(g, "caps", &caps) ||
	    !json_object_is_type(caps, json_type_array)) {
		snprintf(why, len, "bad GPU instance");
		return -EINVAL;
	}
	n = json_object_array_length(caps);
	if (n < 1 || n > DG_MAX_CAPS) {
		snprintf(why, len, "bad GPU instance capability list");
		return -EINVAL;
	}
	lg->instance = true;
	lg->gi = (uint32_t)json_object_get_int64(v);
	for (size_t i = 0; i < n; i++) {
		json_object *c = json_object_array_get_idx(caps, i);
		int64_t m = json_object_get_int64(c);

		if (!json_object_is_type(c, json_type_int) || m < 0 || m > 0xfffff) {
			snprintf(why, len, "bad GPU instance capability minor");
			return -EINVAL;
		}
		lg->caps[lg->n_caps++] = (uint32_t)m;
	}
	return 0;
}

/* Only the majors the driver had: {"nvidia": 195, "nvidia-uvm": 511, ...}. */
static json_object *majors_to_json(const struct dg_majors *m)
{
	json_object *o = json_object_new_object();

	if (m->has_nvidia)
		json_object_object_add(o, "nvidia", json_object_new_int64(m->nvidia));
	if (m->has_uvm)
		json_object_object_add(o, "nvidia-uvm", json_object_new_int64(m->uvm));
	if (m->has_caps)
		json_object_object_add(o, "nvidia-caps", json_object_new_int64(m->caps));
	if (m->has_kfd)
		json_object_object_add(o, "kfd", json_object_new_int64(m->kfd));
	return o;
}

json_object *lease_to_json(const struct lease *l)
{
	json_object *o = json_object_new_object();
	json_object *gpus = json_object_new_array();
	char id[32];

	json_object_object_add(o, "format", json_object_new_int(LEASE_FORMAT));
	/* A string: JSON numbers lose precision above 2^53 in many consumers. */
	snprintf(id, sizeof(id), "%llu", (unsigned long long)l->cgid);
	json_object_object_add(o, "cgroup_id", json_object_new_string(id));
	json_add_str(o, "cgroup", l->cgroup);
	json_add_str(o, "container", l->container);
	json_object_object_add(o, "pid", json_object_new_int(l->pid));
	json_object_object_add(o, "since", json_object_new_int64(l->since));
	for (size_t i = 0; i < l->n_gpus; i++) {
		json_object *g = json_object_new_object();

		json_object_object_add(g, "uuid", json_object_new_string(l->gpus[i].uuid));
		/* Left out for NVIDIA: such a record reads the same as before. */
		if (l->gpus[i].family != DG_VENDOR_NVIDIA)
			json_add_str(g, "vendor", vendor_name(l->gpus[i].family));
		if (l->gpus[i].card)
			json_object_object_add(g, "card",
					       json_object_new_int64(l->gpus[i].card_minor));
		if (l->gpus[i].instance)
			instance_to_json(g, &l->gpus[i]);
		json_object_object_add(g, "minor", json_object_new_int64(l->gpus[i].minor));
		json_object_object_add(g, "shared", json_object_new_boolean(l->gpus[i].shared));
		json_object_object_add(g, "since_ms", json_object_new_int64(l->gpus[i].since_ms));
		json_object_object_add(g, "ms", json_object_new_int64(l->gpus[i].ms));
		json_object_array_add(gpus, g);
	}
	json_object_object_add(o, "gpus", gpus);
	/* Left out when empty: a record without it reads the same as before. */
	if (l->n_spent) {
		json_object *sp = json_object_new_array();

		for (size_t i = 0; i < l->n_spent; i++) {
			json_object *e = json_object_new_object();

			json_object_object_add(e, "uuid", json_object_new_string(l->spent[i].uuid));
			json_object_object_add(e, "ms", json_object_new_int64(l->spent[i].ms));
			json_object_array_add(sp, e);
		}
		json_object_object_add(o, "spent", sp);
	}
	/* Left out without a ttl: such a record reads the same as before. */
	if (l->expires > 0) {
		json_object_object_add(o, "expires", json_object_new_int64(l->expires));
		json_object_object_add(o, "kill_on_expiry",
				       json_object_new_boolean(l->kill_on_expiry));
	}
	/* Left out without grant --driver: such a record reads the same as before. */
	if (l->driver_caps) {
		json_object_object_add(o, "driver_caps", json_object_new_int64(l->driver_caps));
		json_object *files = json_object_new_array();

		for (size_t i = 0; i < l->n_driver_files; i++)
			json_object_array_add(files,
					      json_object_new_string(l->driver_files[i].path));
		json_object_object_add(o, "driver_files", files);
	}
	if (l->has_majors)
		json_object_object_add(o, "majors", majors_to_json(&l->majors));
	/* Left out when empty: a record without devices reads the same as before. */
	if (l->n_devices) {
		json_object *devs = json_object_new_array();

		for (size_t i = 0; i < l->n_devices; i++) {
			json_object *dv = json_object_new_object();
			const char *type = l->devices[i].block ? "b" : "c";
			char path[40];

			snprintf(path, sizeof(path), "/dev/%s", l->devices[i].name);
			json_object_object_add(dv, "path", json_object_new_string(path));
			json_object_object_add(dv, "host",
					       json_object_new_string(l->devices[i].host));
			json_object_object_add(dv, "type", json_object_new_string(type));
			json_object_object_add(dv, "major",
					       json_object_new_int64(l->devices[i].major));
			json_object_object_add(dv, "minor",
					       json_object_new_int64(l->devices[i].minor));
			/* DG_ACC_* bits; left out for read and write, so such a record reads as
			 * before. */
			if (l->devices[i].access)
				json_object_object_add(dv, "access",
						       json_object_new_int64(l->devices[i].access));
			json_object_array_add(devs, dv);
		}
		json_object_object_add(o, "devices", devs);
	}
	return o;
}

static int want(json_object *o, const char *key, json_type type, bool nullable, json_object **ret,
		char *why, size_t len)
{
	json_object *v = NULL;

	if (!json_object_object_get_ex(o, key, &v)) {
		snprintf(why, len, "missing field '%s'", key);
		return -EINVAL;
	}
	if ((v == NULL && !nullable) || (v && !json_object_is_type(v, type))) {
		snprintf(why, len, "field '%s' must be a %s", key, json_type_to_name(type));
		return -EINVAL;
	}
	*ret = v;
	return 0;
}

static int want_str(json_object *o, const char *key, bool nullable, char **ret, char *why,
		    size_t len)
{
	json_object *v;
	int r = want(o, key, json_type_string, nullable, &v, why, len);

	if (r < 0)
		return r;
	return dup_str(v ? json_object_get_string(v) : NULL, ret);
}

/* An optional count of milliseconds: absent leaves *ret as it is. */
static int want_ms(json_object *o, const char *key, int64_t *ret, char *why, size_t len)
{
	json_object *v;

	if (!json_object_object_get_ex(o, key, NULL))
		return 0;
	if (want(o, key, json_type_int, false, &v, why, len) < 0)
		return -EINVAL;
	*ret = json_object_get_int64(v);
	if (*ret < 0) {
		snprintf(why, len, "field '%s' is negative", key);
		return -EINVAL;
	}
	return 0;
}

static int gpus_from_json(json_object *arr, struct lease *l, char *why, size_t len)
{
	size_t n = json_object_array_length(arr);

	if (n > DG_MAX_GPUS) {
		snprintf(why, len, "too many GPUs");
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		json_object *g = json_object_array_get_idx(arr, i), *v;
		struct lease_gpu *lg = gpu_slot(l);
		int64_t minor;

		if (!lg) {
			snprintf(why, len, "out of memory");
			return -ENOMEM;
		}
		if (!json_object_is_type(g, json_type_object) ||
		    want(g, "uuid", json_type_string, false, &v, why, len) < 0)
			return -EINVAL;
		snprintf(lg->uuid, sizeof(lg->uuid), "%s", json_object_get_string(v));
		if (json_object_object_get_ex(g, "vendor", &v) &&
		    vendor_parse(json_object_get_string(v), &lg->family) < 0) {
			snprintf(why, len, "unknown GPU vendor");
			return -EINVAL;
		}
		if (want(g, "minor", json_type_int, false, &v, why, len) < 0)
			return -EINVAL;
		minor = json_object_get_int64(v);
		if (minor < 0 ||
		    minor > (lg->family == DG_VENDOR_NVIDIA ? 254 : DG_DRM_MAX_MINOR)) {
			snprintf(why, len, "GPU minor %lld out of range", (long long)minor);
			return -EINVAL;
		}
		lg->minor = (uint32_t)minor;
		if (json_object_object_get_ex(g, "card", &v)) {
			int64_t card = json_object_get_int64(v);

			if (!json_object_is_type(v, json_type_int) || card < 0 ||
			    card >= DG_DRM_RENDER_BASE || lg->family == DG_VENDOR_NVIDIA) {
				snprintf(why, len, "bad GPU card minor");
				return -EINVAL;
			}
			lg->card = true;
			lg->card_minor = (uint32_t)card;
		}
		if (instance_from_json(g, lg, why, len) < 0)
			return -EINVAL;
		if (want(g, "shared", json_type_boolean, false, &v, why, len) < 0)
			return -EINVAL;
		lg->shared = json_object_get_boolean(v);
		/* Optional: a record from before accounting counts from the lease's start. */
		lg->since_ms = l->since * 1000;
		lg->ms = 0;
		if (want_ms(g, "since_ms", &lg->since_ms, why, len) < 0 ||
		    want_ms(g, "ms", &lg->ms, why, len) < 0)
			return -EINVAL;
	}
	return 0;
}

static int spent_from_json(json_object *arr, struct lease *l, char *why, size_t len)
{
	size_t n = json_object_array_length(arr);

	if (n > DG_MAX_GPUS) {
		snprintf(why, len, "too many spent GPUs");
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		json_object *e = json_object_array_get_idx(arr, i), *v;
		int64_t ms = 0;

		if (!json_object_is_type(e, json_type_object) ||
		    want(e, "uuid", json_type_string, false, &v, why, len) < 0 ||
		    want_ms(e, "ms", &ms, why, len) < 0)
			return -EINVAL;
		add_spent(l, json_object_get_string(v), ms);
	}
	return 0;
}

static int want_u32(json_object *o, const char *key, uint32_t max, uint32_t *ret, char *why,
		    size_t len)
{
	json_object *v;
	int64_t x;

	if (want(o, key, json_type_int, false, &v, why, len) < 0)
		return -EINVAL;
	x = json_object_get_int64(v);
	if (x < 0 || x > max) {
		snprintf(why, len, "device %s %lld out of range", key, (long long)x);
		return -EINVAL;
	}
	*ret = (uint32_t)x;
	return 0;
}

/* The same rules a grant applies to a container path (grant.c): /dev/NAME. */
static bool device_name_ok(const char *name)
{
	size_t n = strlen(name);

	return n > 0 && n < sizeof(((struct lease_device *)0)->name) && !strchr(name, '/') &&
	       strcmp(name, ".") != 0 && strcmp(name, "..") != 0;
}

static int driver_file_add(struct lease *l, const char *path, size_t n, char *why, size_t len)
{
	struct lease_file *v;

	if (n == 0 || path[0] != '/' || n >= LEASE_FILE_PATH_MAX) {
		snprintf(why, len, "driver file '%.*s' is not an absolute path of at most %d bytes",
			 (int)(n > 64 ? 64 : n), path, LEASE_FILE_PATH_MAX - 1);
		return -EINVAL;
	}
	v = realloc(l->driver_files, (l->n_driver_files + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	l->driver_files = v;
	memcpy(v[l->n_driver_files].path, path, n);
	v[l->n_driver_files++].path[n] = '\0';
	return 0;
}

/* An array of paths; records written before it was one hold a string, '\n' after each. */
static int driver_files_from_json(json_object *v, struct lease *l, char *why, size_t len)
{
	if (json_object_is_type(v, json_type_string)) {
		for (const char *p = json_object_get_string(v); *p;) {
			size_t n = strcspn(p, "\n");

			if (n && driver_file_add(l, p, n, why, len) < 0)
				return -EINVAL;
			p += n + (p[n] == '\n');
		}
		return 0;
	}
	if (!json_object_is_type(v, json_type_array)) {
		snprintf(why, len, "field 'driver_files' must be a array");
		return -EINVAL;
	}
	for (size_t i = 0; i < json_object_array_length(v); i++) {
		json_object *f = json_object_array_get_idx(v, i);

		if (!json_object_is_type(f, json_type_string)) {
			snprintf(why, len, "a driver file must be a string");
			return -EINVAL;
		}
		if (driver_file_add(l, json_object_get_string(f), strlen(json_object_get_string(f)),
				    why, len) < 0)
			return -EINVAL;
	}
	return 0;
}

static int devices_from_json(json_object *arr, struct lease *l, char *why, size_t len)
{
	size_t n = json_object_array_length(arr);

	if (n > DG_MAX_DEVICES) {
		snprintf(why, len, "too many devices");
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		json_object *dv = json_object_array_get_idx(arr, i), *v;
		struct lease_device dev = { 0 };
		const char *s;
		int r;

		if (!json_object_is_type(dv, json_type_object)) {
			snprintf(why, len, "a device must be an object");
			return -EINVAL;
		}
		if (want(dv, "path", json_type_string, false, &v, why, len) < 0)
			return -EINVAL;
		s = json_object_get_string(v);
		if (strncmp(s, "/dev/", 5) != 0 || !device_name_ok(s + 5)) {
			snprintf(why, len, "device path '%s' is not /dev/NAME", s);
			return -EINVAL;
		}
		snprintf(dev.name, sizeof(dev.name), "%s", s + 5);
		if (want(dv, "host", json_type_string, false, &v, why, len) < 0)
			return -EINVAL;
		s = json_object_get_string(v);
		if (s[0] != '/' || strlen(s) >= sizeof(dev.host)) {
			snprintf(why, len, "device host path is not an absolute path");
			return -EINVAL;
		}
		snprintf(dev.host, sizeof(dev.host), "%s", s);
		/* Older records may lack it: char, the only type they could hold. */
		v = NULL;
		if (json_object_object_get_ex(dv, "type", NULL) &&
		    want(dv, "type", json_type_string, false, &v, why, len) < 0)
			return -EINVAL;
		s = v ? json_object_get_string(v) : "c";
		if (strcmp(s, "c") != 0 && strcmp(s, "b") != 0) {
			snprintf(why, len, "device type must be \"c\" or \"b\"");
			return -EINVAL;
		}
		dev.block = s[0] == 'b';
		if (want_u32(dv, "major", 4095, &dev.major, why, len) < 0 ||
		    want_u32(dv, "minor", 1048575, &dev.minor, why, len) < 0)
			return -EINVAL;
		if (json_object_object_get_ex(dv, "access", &v) &&
		    want_u32(dv, "access", DG_ACC_MKNOD | DG_ACC_READ | DG_ACC_WRITE, &dev.access,
			     why, len) < 0)
			return -EINVAL;
		r = lease_add_device(l, &dev);
		if (r == -ENOMEM) {
			snprintf(why, len, "out of memory");
			return r;
		}
		if (r <= 0) {
			snprintf(why, len, "device /dev/%s listed twice", dev.name);
			return -EINVAL;
		}
	}
	return 0;
}

/* One optional major of the "majors" object; *has tells whether it was there. */
static int major_from_json(json_object *m, const char *key, bool *has, uint32_t *ret, char *why,
			   size_t len)
{
	json_object *v;
	int64_t x;

	*has = json_object_object_get_ex(m, key, NULL);
	if (!*has)
		return 0;
	if (want(m, key, json_type_int, false, &v, why, len) < 0)
		return -EINVAL;
	x = json_object_get_int64(v);
	if (x <= 0 || x > 4095) {
		snprintf(why, len, "bad major of %s: %lld", key, (long long)x);
		return -EINVAL;
	}
	*ret = (uint32_t)x;
	return 0;
}

static int majors_from_json(json_object *m, struct lease *l, char *why, size_t len)
{
	struct dg_majors *x = &l->majors;

	if (major_from_json(m, "nvidia", &x->has_nvidia, &x->nvidia, why, len) < 0 ||
	    major_from_json(m, "nvidia-uvm", &x->has_uvm, &x->uvm, why, len) < 0 ||
	    major_from_json(m, "nvidia-caps", &x->has_caps, &x->caps, why, len) < 0 ||
	    major_from_json(m, "kfd", &x->has_kfd, &x->kfd, why, len) < 0)
		return -EINVAL;
	l->has_majors = true;
	return 0;
}

int lease_from_json(json_object *o, struct lease **ret, char *why, size_t len)
{
	struct lease *l = NULL;
	json_object *v;
	uint64_t cgid;
	char *end;
	int r = -EINVAL;

	if (!json_object_is_type(o, json_type_object)) {
		snprintf(why, len, "not a JSON object");
		return -EINVAL;
	}
	if (want(o, "format", json_type_int, false, &v, why, len) < 0)
		return -EINVAL;
	if (json_object_get_int(v) != LEASE_FORMAT) {
		snprintf(why, len, "lease format %d is not supported", json_object_get_int(v));
		return -EINVAL;
	}
	if (want(o, "cgroup_id", json_type_string, false, &v, why, len) < 0)
		return -EINVAL;
	errno = 0;
	cgid = strtoull(json_object_get_string(v), &end, 10);
	if (errno || *end || cgid == 0) {
		snprintf(why, len, "bad cgroup_id");
		return -EINVAL;
	}
	l = lease_new(cgid);
	if (!l)
		return -ENOMEM;
	if (want_str(o, "cgroup", false, &l->cgroup, why, len) < 0 ||
	    want_str(o, "container", true, &l->container, why, len) < 0)
		goto fail;
	if (want(o, "pid", json_type_int, false, &v, why, len) < 0)
		goto fail;
	l->pid = json_object_get_int(v);
	if (want(o, "since", json_type_int, false, &v, why, len) < 0)
		goto fail;
	l->since = json_object_get_int64(v);
	if (want(o, "gpus", json_type_array, false, &v, why, len) < 0 ||
	    gpus_from_json(v, l, why, len) < 0)
		goto fail;
	if (json_object_object_get_ex(o, "spent", NULL) &&
	    (want(o, "spent", json_type_array, false, &v, why, len) < 0 ||
	     spent_from_json(v, l, why, len) < 0))
		goto fail;
	/* Optional: records of leases without a ttl have none. */
	if (json_object_object_get_ex(o, "expires", NULL)) {
		if (want(o, "expires", json_type_int, false, &v, why, len) < 0)
			goto fail;
		l->expires = json_object_get_int64(v);
		if (l->expires <= 0) {
			snprintf(why, len, "bad expires");
			goto fail;
		}
		if (want(o, "kill_on_expiry", json_type_boolean, false, &v, why, len) < 0)
			goto fail;
		l->kill_on_expiry = json_object_get_boolean(v);
	}
	/* Optional: records of leases without grant --driver have none. */
	if (json_object_object_get_ex(o, "driver_caps", NULL)) {
		if (want(o, "driver_caps", json_type_int, false, &v, why, len) < 0)
			goto fail;
		l->driver_caps = (unsigned int)json_object_get_int64(v) & DG_DRV_ALL;
		if (!json_object_object_get_ex(o, "driver_files", &v)) {
			snprintf(why, len, "missing field 'driver_files'");
			goto fail;
		}
		if (driver_files_from_json(v, l, why, len) < 0)
			goto fail;
	}
	/* Optional: records written before a driver reload was refreshed live have none. */
	if (json_object_object_get_ex(o, "majors", NULL) &&
	    (want(o, "majors", json_type_object, false, &v, why, len) < 0 ||
	     majors_from_json(v, l, why, len) < 0))
		goto fail;
	/* Optional: records written before grant --device have none. */
	if (json_object_object_get_ex(o, "devices", NULL) &&
	    (want(o, "devices", json_type_array, false, &v, why, len) < 0 ||
	     devices_from_json(v, l, why, len) < 0))
		goto fail;
	*ret = l;
	return 0;
fail:
	lease_free(l);
	return r;
}
