/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Which GPUs a request gets: pure decisions over the inventory and the
 * lease table, all or nothing. A counted request gets free GPUs that meet
 * every constraint, on as few NUMA nodes as can be, lowest indices first.
 */
#ifndef DEVGATE_ALLOC_H
#define DEVGATE_ALLOC_H

#include <stdbool.h>

#include "errors.h"
#include "gpu.h"
#include "lease.h"

/* Where the container's CPUs are, for topology-aware picking. */
struct alloc_cpus {
	int node;	 /* the NUMA node holding all of them; -1 none or not known */
	char where[256]; /* for the reason: "the container's CPUs (2-3) are on node 1" */
};

struct alloc_request {
	const char *selectors;	/* "0,GPU-ab..", or NULL for a counted request */
	unsigned int count;	/* counted request: the container ends with >= count */
	const char *model;	/* substring of the model name, any case */
	const char *arch;	/* architecture family */
	const char *vendor;	/* "nvidia", "amd", "intel" */
	const char *product;	/* "VVVV:DDDD" PCI vendor:device */
	const char *min_memory; /* "40G": at least this much memory (model name) */
	const char *min_cc;	/* "8.0": at least this compute capability */
	bool shared;
	bool same_numa;		       /* counted: all new GPUs on one NUMA node */
	const struct alloc_cpus *cpus; /* NULL: not known */
};

struct gpu_use {
	const struct lease *exclusive; /* holder, when held exclusively */
	const struct lease *shared_by; /* one shared holder, for messages */
	unsigned int shared;	       /* number of shared holders */
};

/*
 * Fills use, one entry per GPU of inv (inv->n_gpus of them), with who holds
 * each GPU, leaving out the lease of cgroup self_cgid.
 */
void alloc_usage(const struct dg_inventory *inv, const struct lease_table *t, uint64_t self_cgid,
		 struct gpu_use *use);

/*
 * Picks the GPUs to add to self (NULL: no lease yet), setting picked[i] for
 * each; GPUs self holds already are not picked again. Returns 0, having
 * picked nothing when self meets the request already, or a negative errno
 * with err set and nothing picked.
 */
int alloc_pick(const struct dg_inventory *inv, const struct gpu_use *use, const struct lease *self,
	       const struct alloc_request *req, bool *picked, struct dg_error *err);

/*
 * Does what alloc_pick does and, for a counted request, writes why these
 * GPUs in why: "picked GPU 2,3: on NUMA node 1; the container's CPUs (2-3)
 * are on node 1". A counted request prefers one NUMA node: that of the
 * container's GPUs, then that of its CPUs, then the one with the most free
 * GPUs; when none has room, the fewest nodes.
 */
int alloc_pick_why(const struct dg_inventory *inv, const struct gpu_use *use,
		   const struct lease *self, const struct alloc_request *req, bool *picked,
		   char *why, size_t len, struct dg_error *err);

/*
 * Writes how messages name l's holder: "container NAME", or for a runtime's
 * long id its first 12 digits as runtimes print them, "container 3f2a5c7d1e0b…".
 */
void holder_text(const struct lease *l, char *buf, size_t len);

/*
 * Checks that req is one request (selectors, or a count of 1 to DG_MAX_GPUS
 * with constraints) and that its constraint strings parse. Returns 0, or
 * -EINVAL with err set.
 */
int alloc_check_request(const struct alloc_request *req, struct dg_error *err);

#endif
