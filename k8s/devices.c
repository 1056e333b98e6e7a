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

int k8s_pick_check(size_t n_avail, size_t n_must, long long size, char *why, size_t why_len)
{
	if (size < 0) {
		snprintf(why, why_len, "negative allocation_size %lld", size);
		return -EINVAL;
	}
	if (size > K8S_MAX_DEVICES || n_avail > K8S_MAX_DEVICES) {
		snprintf(why, why_len,
			 "allocation_size %lld with %zu available IDs: devgate-k8s offers at "
			 "most %d devices, so kubelet never asks for more",
			 size, n_avail, K8S_MAX_DEVICES);
		return -E2BIG;
	}
	if (n_must > (size_t)size) {
		snprintf(why, why_len, "more must_include IDs (%zu) than allocation_size (%lld)",
			 n_must, size);
		return -EINVAL;
	}
	return 0;
}

int k8s_pick(const struct k8s_devices *d, const char *const *avail, size_t n_avail,
	     const char *const *must, size_t n_must, size_t size, const char **ret)
{
	long ranks[K8S_MAX_DEVICES];
	bool taken[K8S_MAX_DEVICES];
	size_t n = 0;

	if (n_avail > K8S_MAX_DEVICES || size > K8S_MAX_DEVICES)
		return -E2BIG;
	if (n_must > size)
		return -EINVAL;
	for (size_t i = 0; i < n_must; i++)
		if (!listed(ret, n, must[i]))
			ret[n++] = must[i];
	/* Each available ID ranked once; one taken already, or named twice, is out. */
	for (size_t i = 0; i < n_avail; i++) {
		taken[i] = listed(ret, n, avail[i]) || listed(avail, i, avail[i]);
		ranks[i] = rank(d, avail[i]);
	}
	while (n < size) {
		size_t best = n_avail;

		for (size_t i = 0; i < n_avail; i++)
			if (!taken[i] && (best == n_avail || ranks[i] < ranks[best]))
				best = i;
		if (best == n_avail)
			break;
		taken[best] = true;
		ret[n++] = avail[best];
	}
	return (int)n;
}

int k8s_allocate_check(const struct k8s_devices *d, const char *const *ids, size_t n, char *why,
		       size_t why_len)
{
	if (n > K8S_MAX_DEVICES) {
		snprintf(why, why_len, "%zu device IDs: devgate-k8s offers at most %d devices", n,
			 K8S_MAX_DEVICES);
		return -E2BIG;
	}
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
