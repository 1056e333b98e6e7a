/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Which GPUs a request gets. Pure logic over the inventory and the lease
 * table; all-or-nothing. Policy for counted requests: free GPUs that meet
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

/* Usage of every GPU by leases other than self_cgid. use has n_gpus slots. */
void alloc_usage(const struct dg_inventory *inv, const struct lease_table *t, uint64_t self_cgid,
		 struct gpu_use *use);

/*
 * Picks the GPUs to add to self (may be NULL: no lease yet). picked[i] is
 * set for GPUs newly granted; GPUs self already holds are not picked again.
 * Returns 0 (possibly picking nothing: the request is already met).
 */
int alloc_pick(const struct dg_inventory *inv, const struct gpu_use *use, const struct lease *self,
	       const struct alloc_request *req, bool *picked, struct dg_error *err);

/*
 * alloc_pick, and for a counted request why these GPUs, in why: "picked GPU
 * 2,3: on NUMA node 1; the container's CPUs (2-3) are on node 1". Counted
 * requests prefer one NUMA node: the node of the container's GPUs, then of
 * its CPUs, then the one with most free; else the fewest nodes.
 */
int alloc_pick_why(const struct dg_inventory *inv, const struct gpu_use *use,
		   const struct lease *self, const struct alloc_request *req, bool *picked,
		   char *why, size_t len, struct dg_error *err);

/* Validates the constraint strings of req. */
/* "container 3f2a5c7d1e0b…" for runtime ids, as runtimes print them; names stay whole. */
void holder_text(const struct lease *l, char *buf, size_t len);

int alloc_check_request(const struct alloc_request *req, struct dg_error *err);

#endif
