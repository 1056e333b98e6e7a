// SPDX-License-Identifier: Apache-2.0
/*
 * devgate-k8s's decisions without I/O (see devices.h): devgated's GPUs as
 * device plugin devices with health, the preferred pick, and Allocate's
 * checks and CDI names. Pure, so the unit tests reach all of it.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "devices.h"
#include "wire.h"

static void set_why(struct k8s_device *dev, const char *why)
{
	dev->healthy = false;
	snprintf(dev->why, sizeof(dev->why), "%s", why);
}

int k8s_devices_from_list(const struct dg_list_reply *list, struct k8s_devices *ret)
{
	size_t n = list->n_gpus < K8S_MAX_DEVICES ? list->n_gpus : K8S_MAX_DEVICES;

	ret->n = 0;
	for (size_t i = 0; i < n; i++) {
		const struct dg_list_gpu *g = &list->gpus[i];
		struct k8s_device *dev = &ret->dev[ret->n];
		const char *uuid = g->gpu.uuid ? g->gpu.uuid : "";

		/* Without a UUID kubelet could not name it again after a restart. */
		if (!uuid[0] || strlen(uuid) >= sizeof(dev->id))
			continue;
		memset(dev, 0, sizeof(*dev));
		snprintf(dev->id, sizeof(dev->id), "%s", uuid);
		dev->index = g->gpu.has_index ? (long)g->gpu.index : (long)i;
		dev->healthy = true;
		dev->free = g->state && strcmp(g->state, "free") == 0;
		if (g->gpu.problem)
			set_why(dev, g->gpu.problem);
		else if (g->state && strcmp(g->state, "unusable") == 0)
			set_why(dev, "devgated lists it unusable");
		ret->n++;
	}
	return list->n_gpus > K8S_MAX_DEVICES ? -E2BIG : 0;
}

void k8s_devices_unreachable(struct k8s_devices *d, const char *why)
{
	for (size_t i = 0; i < d->n; i++) {
		d->dev[i].healthy = false;
		d->dev[i].free = false;
		snprintf(d->dev[i].why, sizeof(d->dev[i].why), "%s", why);
	}
}

bool k8s_devices_same(const struct k8s_devices *a, const struct k8s_devices *b)
{
	if (a->n != b->n)
		return false;
	for (size_t i = 0; i < a->n; i++)
		if (strcmp(a->dev[i].id, b->dev[i].id) != 0 ||
		    a->dev[i].healthy != b->dev[i].healthy)
			return false;
	return true;
}

const struct k8s_device *k8s_devices_find(const struct k8s_devices *d, const char *id)
{
	for (size_t i = 0; i < d->n; i++)
		if (strcmp(d->dev[i].id, id) == 0)
			return &d->dev[i];
	return NULL;
}

static bool listed(const char *const *ids, size_t n, const char *id)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(ids[i], id) == 0)
			return true;
	return false;
}

/* Rank in devgate's order; unknown IDs after every known one. */
static long rank(const struct k8s_devices *d, const char *id)
{
	const struct k8s_device *dev = k8s_devices_find(d, id);

	if (!dev)
		return 4L * K8S_MAX_DEVICES * 1000000L;
	return (dev->healthy ? 0 : 2L * K8S_MAX_DEVICES * 1000000L) +
	       (dev->free ? 0 : K8S_MAX_DEVICES * 1000000L) + dev->index;
}

int k8s_pick(const struct k8s_devices *d, const char *const *avail, size_t n_avail,
	     const char *const *must, size_t n_must, size_t size, const char **ret)
{
	size_t n = 0;

	if (n_must > size)
		return -EINVAL;
	for (size_t i = 0; i < n_must; i++)
		if (!listed(ret, n, must[i]))
			ret[n++] = must[i];
	while (n < size) {
		size_t best = n_avail;
		long best_rank = 0;

		/* Selection, not a sort: kubelet asks for a handful of IDs. */
		for (size_t i = 0; i < n_avail; i++) {
			long r = rank(d, avail[i]);

			if (listed(ret, n, avail[i]) || (best < n_avail && r >= best_rank))
				continue;
			best = i;
			best_rank = r;
		}
		if (best == n_avail)
			break;
		ret[n++] = avail[best];
	}
	return (int)n;
}

int k8s_allocate_check(const struct k8s_devices *d, const char *const *ids, size_t n, char *why,
		       size_t why_len)
{
	for (size_t i = 0; i < n; i++) {
		const struct k8s_device *dev = k8s_devices_find(d, ids[i]);

		if (!dev) {
			snprintf(why, why_len, "devgated has no GPU '%.64s'", ids[i]);
			return -ENOENT;
		}
		if (!dev->healthy) {
			snprintf(why, why_len, "GPU %s is unhealthy: %s", dev->id, dev->why);
			return -EBUSY;
		}
	}
	return 0;
}

int k8s_cdi_name(const char *kind, const char *id, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s=%s", kind, id);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}
