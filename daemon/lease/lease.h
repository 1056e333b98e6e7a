/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A lease ties GPUs to one container, keyed by its cgroup id. The table is
 * the daemon's truth about who holds what; state.c persists it.
 */
#ifndef DEVGATE_LEASE_H
#define DEVGATE_LEASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "errors.h"
#include "gpu.h"

struct lease_gpu {
	char uuid[80];
	enum dg_vendor family; /* its node: nvidiaN or dri/renderD<N> */
	uint32_t minor;
	bool card; /* DRM: its card node dri/card<card_minor> too (grant --card) */
	uint32_t card_minor;
	/* NVIDIA MIG: GPU instance gi of the GPU, not the whole GPU, with its capability nodes */
	bool instance;
	uint32_t gi;
	size_t n_caps;
	uint32_t caps[DG_MAX_CAPS]; /* /dev/nvidia-caps/nvidia-cap<N>: the GI's, then its CIs' */
	bool shared;
	/* GPU time: held since since_ms (CLOCK_REALTIME ms), after ms of earlier spans. */
	int64_t since_ms;
	int64_t ms;
};

/* The GPU time of a GPU that left the lease, kept while the lease lives. */
struct lease_spent {
	char uuid[80];
	int64_t ms;
};

/* A host character device granted by path (grant --device), not a GPU. */
struct lease_device {
	char name[32];	/* the node in the container: /dev/NAME, one component */
	char host[256]; /* the host path it was granted from, for display and revoke */
	uint32_t major;
	uint32_t minor;
	uint32_t access; /* DG_ACC_* (grant --access); 0: read and write */
	bool block;	 /* a block device; records without "type" are char */
};

/* A driver file mounted into the container (grant --driver): its path there. */
#define LEASE_FILE_PATH_MAX 160
struct lease_file {
	char path[LEASE_FILE_PATH_MAX];
};

struct lease {
	uint64_t cgid;
	char *cgroup;	 /* v2 path, for display */
	char *container; /* caller's label (OCI id, name); may be NULL */
	pid_t pid;
	int64_t since;
	struct lease_gpu *gpus; /* n_gpus of them; a lease holds few, a host has many leases */
	size_t n_gpus;
	struct lease_device *devices; /* n_devices of them, at most DG_MAX_DEVICES */
	size_t n_devices;
	/* CLOCK_REALTIME seconds at which the lease is revoked (grant --ttl); 0: never. */
	int64_t expires;
	bool kill_on_expiry; /* holders of its nodes are killed at expiry */
	/* grant --driver: DG_DRV_* asked for, and the files mounted (container paths) */
	unsigned int driver_caps;
	struct lease_file *driver_files;
	size_t n_driver_files;
	struct lease_spent *spent; /* n_spent GPUs it held before, at most DG_MAX_GPUS */
	size_t n_spent;
	/* The driver's majors its nodes and grants were made with (refresh.c); has_majors
	 * false: a record older than that, taken to match the inventory. */
	bool has_majors;
	struct dg_majors majors;
	/* runtime only, never persisted; no fd: a host may have thousands of leases */
	int watch;
	uint64_t progs_digest; /* the cgroup's device programs when last found settled; 0: unknown
				*/
};

/*
 * How many leases in the table hold one GPU, kept as leases enter and leave
 * it, so a grant does not walk thousands of leases to find what is free.
 */
struct lease_use {
	char uuid[80];
	bool instance; /* counts MIG instance gi of the GPU, not the whole GPU */
	uint32_t gi;
	uint32_t n_exclusive;
	uint32_t n_shared;
	/* Two of the holders, for messages; a left one is NULL until looked for. */
	const struct lease *exclusive[2];
	const struct lease *shared[2];
};

struct lease_table {
	struct lease **v;
	size_t n;
	size_t cap;
	uint32_t *index;       /* open addressing by cgroup id: position in v + 1, 0: empty */
	size_t n_index;	       /* a power of two, at least twice n */
	struct lease_use *use; /* one per GPU UUID ever held, n_use of them */
	size_t n_use;
	size_t cap_use;
};

struct lease *lease_new(uint64_t cgid);
void lease_free(struct lease *l);
struct lease *lease_copy(const struct lease *l);

int lease_table_add(struct lease_table *t, struct lease *l);
struct lease *lease_table_find(const struct lease_table *t, uint64_t cgid);
/* The cgroup ids of all t->n leases, for walks that release leases as they go
 * (releasing edits the table). NULL when out of memory; the caller frees. */
uint64_t *lease_table_ids(const struct lease_table *t);
/* By label; -EEXIST (ret NULL) when more than one lease carries it. */
int lease_table_find_label(const struct lease_table *t, const char *label, struct lease **ret);
/* Removes and returns the lease (caller frees), or NULL. */
struct lease *lease_table_take(struct lease_table *t, uint64_t cgid);
void lease_table_clear(struct lease_table *t);
/* What the table's leases hold of GPU uuid; NULL when none ever did. */
const struct lease_use *lease_table_use(const struct lease_table *t, const char *uuid);
/* The same for MIG instance gi of GPU uuid. */
const struct lease_use *lease_table_use_gi(const struct lease_table *t, const char *uuid,
					   uint32_t gi);
/*
 * A lease other than skip_cgid's holding a MIG instance of GPU uuid; NULL if
 * none. *ret_gi: which instance.
 */
const struct lease *lease_table_instance_holder(const struct lease_table *t, const char *uuid,
						uint64_t skip_cgid, uint32_t *ret_gi);
/*
 * A lease other than skip_cgid's holding uuid (shared or not), from the two
 * kept in u or, when both left, by a walk; NULL if none.
 */
const struct lease *lease_table_holder(const struct lease_table *t, const struct lease_use *u,
				       bool shared, uint64_t skip_cgid);
/* lease_del_gpu for a lease in the table, which keeps its counts. */
void lease_table_del_gpu(struct lease_table *t, struct lease *l, const char *uuid);

const struct lease_gpu *lease_find_gpu(const struct lease *l, const char *uuid);
int lease_add_gpu(struct lease *l, const struct dg_gpu *gpu, bool shared);
void lease_del_gpu(struct lease *l, const char *uuid);
/* Adds MIG instance gi of gpu (exclusive); 0 when the lease holds it already. */
int lease_add_instance(struct lease *l, const struct dg_gpu *gpu, const struct dg_mig_gi *gi);
/* The lease's GPU gpu (added before) holds its card node too. */
void lease_gpu_add_card(struct lease *l, const struct dg_gpu *gpu);

/*
 * GPU-milliseconds, to now_ms (CLOCK_REALTIME): of one GPU of the lease (held
 * or spent; 0 if neither), and of all of them. A lease holding N GPUs adds N
 * a millisecond. The spans start when a GPU enters the lease and are kept in
 * the record, so time while devgated is down counts: the kernel kept the grant.
 */
int64_t lease_gpu_ms(const struct lease *l, const char *uuid, int64_t now_ms);
int64_t lease_total_ms(const struct lease *l, int64_t now_ms);

/* Whether the lease holds anything: a lease with devices only is a lease. */
bool lease_holds(const struct lease *l);

/* By container path ("/dev/NAME") or host path; NULL if none. */
const struct lease_device *lease_find_device(const struct lease *l, const char *path);
/* 1 added, 0 already held (same node and numbers), -EEXIST name or numbers
 * taken by another of its devices, -E2BIG full, -ENOMEM. */
int lease_add_device(struct lease *l, const struct lease_device *dev);
void lease_del_device(struct lease *l, const char *name);

/* Forgets grant --driver's files (the lease's last GPU left). */
void lease_driver_clear(struct lease *l);

/* "r", "rw", "rwm" (any order, each once) -> DG_ACC_* bits; -EINVAL. */
int lease_access_parse(const char *s, uint32_t *ret);

/* The nodes of one GPU of a lease: its node, its card or MIG capability nodes. */
size_t lease_gpu_nodes(const struct lease_gpu *g, const struct dg_inventory *inv,
		       struct dg_node *out, size_t max);
/* Device nodes the lease grants: its GPUs, control nodes if any GPU, its devices. */
size_t lease_nodes(const struct lease *l, const struct dg_inventory *inv, struct dg_node *out,
		   size_t max);

/*
 * Expiry arithmetic, in CLOCK_REALTIME seconds. A new expiry is ttl after
 * now; an extension adds by to the expiry (or to now, if that passed).
 * Either is -ERANGE when it would end more than DURATION_MAX_S from now;
 * an extension of a lease without expiry is -ENOENT.
 */
int lease_expiry_new(int64_t now, int64_t ttl, int64_t *ret);
int lease_expiry_extend(int64_t expires, int64_t now, int64_t by, int64_t *ret);
/* Seconds left, 0 once passed; -1 when the lease does not expire. */
int64_t lease_expiry_left(const struct lease *l, int64_t now);
/* The earliest expiry of the table's leases; 0 when none expires. */
int64_t lease_table_next_expiry(const struct lease_table *t);

/*
 * The container id a runtime put in the cgroup's name, for display when the
 * caller gave no label: "/x/docker-ID.scope" -> "ID", "/c1" -> "c1".
 * Returns a new string, or NULL for "/".
 */
char *lease_label_from_cgroup(const char *cgroup);

/* For log lines: "" for 0, " and N device(s)" otherwise (GPU counts stay as they were). */
const char *lease_devices_note(size_t n, char *buf, size_t len);

/* Short display label: the container label or the cgroup path. */
const char *lease_label(const struct lease *l);

#endif
