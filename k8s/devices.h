/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What devgate-k8s tells kubelet, decided without any I/O: devgated's GPUs
 * as device plugin devices (by UUID, with health), the preferred pick of
 * an allocation, and the CDI names Allocate answers with. C, so the unit
 * tests (cmocka) reach it; the gRPC layer (main.cc) includes it too.
 */
#ifndef DEVGATE_K8S_DEVICES_H
#define DEVGATE_K8S_DEVICES_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* kubelet allows 63 characters in a device ID; a GPU UUID has 40. */
#define K8S_ID_MAX 64
#define K8S_WHY_MAX 160
/*
 * The devices devgate-k8s offers kubelet, and so the most IDs any list of
 * a request may hold and the largest allocation: kubelet names only
 * devices the plugin offered.
 */
#define K8S_MAX_DEVICES 64
/* Containers in one request: kubelet sends one; a pod's few at most. */
#define K8S_MAX_CONTAINERS 64
/* The largest request the plugin's socket takes (bytes): every list full, and room. */
#define K8S_MAX_MESSAGE (1024 * 1024)

struct k8s_device {
	char id[K8S_ID_MAX]; /* devgated's GPU UUID */
	long index;	     /* devgated's index (PCI bus order) */
	bool healthy;
	bool free;	       /* no container holds it */
	char why[K8S_WHY_MAX]; /* why unhealthy; empty when healthy */
};

struct k8s_devices {
	struct k8s_device dev[K8S_MAX_DEVICES];
	size_t n;
};

struct dg_list_reply;

/*
 * devgated's list -> devices. A GPU is unhealthy when its state is
 * "unusable" or it carries a problem (devgated's node check at start, the
 * check doctor makes), or when it has no UUID kubelet could use. Returns
 * 0, or -E2BIG when devgated lists more GPUs than K8S_MAX_DEVICES (the
 * first ones are kept).
 */
int k8s_devices_from_list(const struct dg_list_reply *list, struct k8s_devices *ret);

/* devgated unreachable: the devices kubelet knows stay, all unhealthy. */
void k8s_devices_unreachable(struct k8s_devices *d, const char *why);

/* What kubelet sees (IDs and health, in order) is the same in a and b. */
bool k8s_devices_same(const struct k8s_devices *a, const struct k8s_devices *b);

const struct k8s_device *k8s_devices_find(const struct k8s_devices *d, const char *id);

/*
 * Whether one container's GetPreferredAllocation is one kubelet could send:
 * allocation_size size from 0 to K8S_MAX_DEVICES, at most K8S_MAX_DEVICES
 * available IDs, no more must_include IDs than size. Returns 0, or -E2BIG
 * (a list or the size over the bound) or -EINVAL, with the reason in why.
 */
int k8s_pick_check(size_t n_avail, size_t n_must, long long size, char *why, size_t why_len);

/*
 * GetPreferredAllocation for one container: size IDs out of avail, with
 * every ID of must first (kubelet requires them), then devgate's order:
 * healthy before unhealthy, free before held, lowest index first; IDs
 * devgated does not know come last, in kubelet's order. Writes at most
 * size pointers (into avail/must) to ret and returns how many; fewer
 * when avail has fewer. The work is bounded: -E2BIG when avail or size
 * exceed K8S_MAX_DEVICES, -EINVAL when must holds more than size IDs.
 */
int k8s_pick(const struct k8s_devices *d, const char *const *avail, size_t n_avail,
	     const char *const *must, size_t n_must, size_t size, const char **ret);

/*
 * Allocate: every ID must be a device devgated lists, and healthy, and no
 * more than K8S_MAX_DEVICES of them. Returns 0, -ENOENT (unknown), -EBUSY
 * (unhealthy) or -E2BIG (too many), with the reason in why.
 */
int k8s_allocate_check(const struct k8s_devices *d, const char *const *ids, size_t n, char *why,
		       size_t why_len);

/* "KIND=ID", the CDI device 'devgatectl cdi generate --kind KIND' names. */
int k8s_cdi_name(const char *kind, const char *id, char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif
