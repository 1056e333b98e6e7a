/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A lease ties GPUs and host devices to one container, keyed by its cgroup
 * id. The lease table is the daemon's truth about who holds what, with
 * counts per GPU so a grant need not walk every lease. record.c turns a
 * lease into JSON and back; state.c keeps those records on disk.
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

/* A host device granted by path (grant --device), not a GPU: char, or block where allowed. */
struct lease_device {
	char name[32];	/* the node in the container: /dev/NAME, one component */
	char host[256]; /* the host path it was granted from, for display and revoke */
	uint32_t major;
	uint32_t minor;
	uint32_t access; /* DG_ACC_* (grant --access); 0: read and write */
	bool block;	 /* a block device; records without "type" are char */
};

/* A node the container had before its lease got it: "/dev/" and its name (dg_node's). */
#define LEASE_KEPT_MAX 40
struct lease_kept {
	char path[LEASE_KEPT_MAX];
};

/* A driver file mounted into the container (grant --driver): its path there. */
#define LEASE_FILE_PATH_MAX 160
struct lease_file {
	char path[LEASE_FILE_PATH_MAX];
};

/* A directory devgate made in the container for driver files: its path there, its inode. */
struct lease_dir {
	char path[LEASE_FILE_PATH_MAX];
	uint64_t ino;
};

/* A rule devgate added to a cgroup v1 devices list: "c 195:0 rw" (what was not allowed before). */
#define LEASE_CG1_RULE_MAX 32
struct lease_cg1_rule {
	char rule[LEASE_CG1_RULE_MAX];
};

struct lease {
	uint64_t cgid;
	char *cgroup;	 /* v2 path, for display */
	char *container; /* caller's label (OCI id, name); may be NULL */
	char *runtime;	 /* the runtime whose name container is; NULL: a label */
	pid_t pid;
	int64_t since;
	struct lease_gpu *gpus; /* n_gpus of them; a lease holds few, a host has many leases */
	size_t n_gpus;
	struct lease_device *devices; /* n_devices of them, at most DG_MAX_DEVICES */
	size_t n_devices;
	/* CLOCK_REALTIME seconds at which the lease is revoked (grant --ttl); 0: never. */
	int64_t expires;
	bool kill_on_expiry; /* holders of its nodes are killed at expiry */
	/*
	 * cgid and cgroup are of the v1 devices hierarchy (a host with cgroup
	 * v1 alone), not v2: ids of two hierarchies may be the same number.
	 */
	bool v1_keyed;
	/*
	 * grant --driver: DG_DRV_* asked for, the files mounted (container
	 * paths), and the directories made for them, in the order made.
	 */
	unsigned int driver_caps;
	struct lease_file *driver_files;
	size_t n_driver_files;
	struct lease_dir *driver_dirs;
	size_t n_driver_dirs;
	struct lease_spent *spent; /* n_spent GPUs it held before, at most DG_MAX_GPUS */
	size_t n_spent;
	/*
	 * The driver's majors its nodes and grants were made with (refresh.c).
	 * has_majors is false for a record older than that: taken to match the
	 * inventory.
	 */
	bool has_majors;
	struct dg_majors majors;
	/*
	 * grant --root, from the OCI hook before pivot_root (and only from uid
	 * 0): the rootfs in the container's mount namespace and the identity
	 * the hook found it with. Its nodes are made and removed below that
	 * directory, found by path or, once the container pivoted into it, as
	 * its root. NULL: the process's own root.
	 */
	char *root;
	uint64_t root_dev, root_ino;
	/*
	 * The nodes that were in the container with the right numbers when the
	 * lease got them (the runtime's /dev/null, an image's node): devgate did
	 * not make them, so a revoke leaves them. Records older than the key
	 * have none: their devgated made, and removed, every node.
	 */
	struct lease_kept *kept;
	size_t n_kept;
	/*
	 * cgroup v1 (hybrid and v1 hosts): the container's devices cgroup and
	 * the rules devgate added to its list, which a revoke denies again.
	 * NULL and none where the container has no v1 devices cgroup.
	 */
	char *cg1_path;
	struct lease_cg1_rule *cg1_added;
	size_t n_cg1_added;
	/* Runtime only, never in the record. No fd: a host may have thousands of leases. */
	int watch; /* the cgroup's inotify watch (watch.c); -1: none */
	/* The cgroup's device programs when last found settled; 0: not known. */
	uint64_t progs_digest;
	/* Its device layers when a grant was last proven inside (grant/proof.c); 0: never. */
	uint64_t proof_fp;
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

/* Returns a new lease of cgroup cgid that holds nothing, or NULL when out of memory. */
struct lease *lease_new(uint64_t cgid);
/* Frees l and everything it holds; l may be NULL. */
void lease_free(struct lease *l);
/*
 * Returns a copy of l with its own memory, or NULL when out of memory. It
 * copies what a record stores; the runtime members (watch, progs_digest)
 * start as in a new lease.
 */
struct lease *lease_copy(const struct lease *l);

/*
 * Adds l to the table, which owns it from then on, and counts its GPUs.
 * Returns 0, or -ENOMEM with the table as it was and l still the caller's.
 */
int lease_table_add(struct lease_table *t, struct lease *l);
/* Returns the lease of cgroup cgid, or NULL when the table has none. */
struct lease *lease_table_find(const struct lease_table *t, uint64_t cgid);
/*
 * Returns the cgroup ids of the table's t->n leases, for walks that release
 * leases as they go (releasing edits the table); the caller frees the array.
 * Returns NULL when out of memory.
 */
uint64_t *lease_table_ids(const struct lease_table *t);
/*
 * Finds the lease labelled label and returns 0 with it in *ret. Returns
 * -ENOENT when no lease carries the label, and -EEXIST when more than one
 * does; *ret is NULL then.
 */
int lease_table_find_label(const struct lease_table *t, const char *label, struct lease **ret);
/*
 * Removes the lease of cgroup cgid from the table and returns it, for the
 * caller to free; returns NULL when the table has none.
 */
struct lease *lease_table_take(struct lease_table *t, uint64_t cgid);
/* Frees every lease of the table and the table's own memory; the table is then empty. */
void lease_table_clear(struct lease_table *t);
/*
 * Returns how many of the table's leases hold the whole GPU uuid, or NULL
 * when no lease ever held it.
 */
const struct lease_use *lease_table_use(const struct lease_table *t, const char *uuid);
/* Returns the same counts for MIG instance gi of GPU uuid, or NULL. */
const struct lease_use *lease_table_use_gi(const struct lease_table *t, const char *uuid,
					   uint32_t gi);
/*
 * Returns a lease, other than the one of cgroup skip_cgid, that holds a MIG
 * instance of GPU uuid, and sets *ret_gi to that instance. Returns NULL when
 * there is none.
 */
const struct lease *lease_table_instance_holder(const struct lease_table *t, const char *uuid,
						uint64_t skip_cgid, uint32_t *ret_gi);
/*
 * Returns a lease, other than the one of cgroup skip_cgid, that holds what u
 * counts, shared or exclusively as shared says; NULL when there is none. It
 * tries the two holders u remembers, and walks the table only when both left.
 */
const struct lease *lease_table_holder(const struct lease_table *t, const struct lease_use *u,
				       bool shared, uint64_t skip_cgid);
/*
 * Removes GPU uuid from l, a lease in the table, and updates the table's
 * counts. (lease_del_gpu on a lease in the table would leave them wrong.)
 */
void lease_table_del_gpu(struct lease_table *t, struct lease *l, const char *uuid);

/* Returns l's GPU uuid (matched regardless of case), or NULL when l does not hold it. */
const struct lease_gpu *lease_find_gpu(const struct lease *l, const char *uuid);
/*
 * Adds the whole GPU gpu to l, shared or exclusively. A GPU that l held
 * before carries on from the GPU time it had. Returns 1 when it was added,
 * 0 when l holds it already, -E2BIG when l holds DG_MAX_GPUS, or -ENOMEM.
 */
int lease_add_gpu(struct lease *l, const struct dg_gpu *gpu, bool shared);
/*
 * Removes GPU uuid from l and keeps its GPU time among l's spent GPUs; does
 * nothing when l does not hold it. For a lease in the table, use
 * lease_table_del_gpu.
 */
void lease_del_gpu(struct lease *l, const char *uuid);
/*
 * Adds MIG instance gi of gpu to l, exclusively, with its capability nodes.
 * Returns 1 when it was added, 0 when l holds that GPU already (whole or an
 * instance), or an error as lease_add_gpu.
 */
int lease_add_instance(struct lease *l, const struct dg_gpu *gpu, const struct dg_mig_gi *gi);
/*
 * Marks l's GPU gpu, added before, as holding its card node too. Does
 * nothing when gpu is not a DRM GPU with a card node.
 */
void lease_gpu_add_card(struct lease *l, const struct dg_gpu *gpu);

/*
 * GPU-milliseconds up to now_ms (CLOCK_REALTIME): lease_gpu_ms returns those
 * of one GPU of l, held or spent (0 when neither), lease_total_ms those of
 * all of them; a lease holding N GPUs adds N a millisecond. A GPU's span
 * starts when it enters the lease and is kept in the record, so the time
 * devgated is down counts too: the kernel kept the grant.
 */
int64_t lease_gpu_ms(const struct lease *l, const char *uuid, int64_t now_ms);
int64_t lease_total_ms(const struct lease *l, int64_t now_ms);

/* Returns whether l holds anything: a GPU or a device (a lease of devices only is a lease). */
bool lease_holds(const struct lease *l);
/* A copy of old without what next holds: what a revoke from old to next takes. NULL: no memory. */
struct lease *lease_minus(const struct lease *old, const struct lease *next);

/* Returns l's device whose container path ("/dev/NAME") or host path is path, or NULL. */
const struct lease_device *lease_find_device(const struct lease *l, const char *path);
/*
 * Adds dev to l. Returns 1 when it was added, or when l held it with
 * another access mode and now has dev's; 0 when l holds it already as it
 * is; -EEXIST when another of l's devices has its name or its numbers;
 * -E2BIG when l holds DG_MAX_DEVICES; -ENOMEM.
 */
int lease_add_device(struct lease *l, const struct lease_device *dev);
/* Removes l's device called name, keeping the others in order; does nothing when there is none. */
void lease_del_device(struct lease *l, const char *name);

/* Forgets grant --driver's capabilities, files and directories, when the lease's last GPU left. */
void lease_driver_clear(struct lease *l);
/* Adds path to l's driver files (or directory path, inode ino, to its directories). 0, -ENOMEM. */
int lease_add_driver_file(struct lease *l, const char *path);
int lease_add_driver_dir(struct lease *l, const char *path, uint64_t ino);

/* Returns whether node name (as in dg_node) is one l keeps: it was there before devgate. */
bool lease_node_kept(const struct lease *l, const char *name);
/*
 * Sets the nodes l keeps to those of nodes (n of them) whose keep[i] is
 * true. Returns 1 when that changed them, 0 when not, -ENOMEM (l as it was).
 */
int lease_keep_nodes(struct lease *l, const struct dg_node *nodes, const bool *keep, size_t n);
/*
 * Sets l's root (grant --root) to path with identity dev, ino; NULL path
 * clears it. Returns 0 or -ENOMEM (l as it was).
 */
int lease_set_root(struct lease *l, const char *path, uint64_t dev, uint64_t ino);

/*
 * Parses an access mode ("r", "rw", "rwm": each letter once, in any order)
 * into DG_ACC_* bits in *ret. Returns 0, or -EINVAL for an empty mode, an
 * unknown letter or a letter given twice.
 */
int lease_access_parse(const char *s, uint32_t *ret);

/*
 * Fills out, up to max, with the device nodes of g, one GPU of a lease: its
 * node, then its card node or its MIG capability nodes (all instances' for a
 * whole GPU in MIG mode). Returns how many it wrote.
 */
size_t lease_gpu_nodes(const struct lease_gpu *g, const struct dg_inventory *inv,
		       struct dg_node *out, size_t max);
/*
 * Fills out, up to max, with every device node l grants: its GPUs' nodes,
 * the control nodes of the vendors it holds GPUs of, and its devices.
 * Returns how many it wrote.
 */
size_t lease_nodes(const struct lease *l, const struct dg_inventory *inv, struct dg_node *out,
		   size_t max);

/*
 * Expiry arithmetic, in CLOCK_REALTIME seconds. lease_expiry_new sets *ret
 * to ttl after now. lease_expiry_extend sets *ret to by after the expiry,
 * or after now when the expiry passed. Both return 0, or -ERANGE when ttl
 * or by is not positive or the result is more than DURATION_MAX_S from now;
 * extending a lease that does not expire (expires 0) returns -ENOENT.
 */
int lease_expiry_new(int64_t now, int64_t ttl, int64_t *ret);
int lease_expiry_extend(int64_t expires, int64_t now, int64_t by, int64_t *ret);
/* Returns the seconds l has left (0 once its expiry passed), or -1 when it does not expire. */
int64_t lease_expiry_left(const struct lease *l, int64_t now);
/* Returns the earliest expiry among the table's leases, or 0 when none expires. */
int64_t lease_table_next_expiry(const struct lease_table *t);

/*
 * Returns the container id a runtime put in the cgroup's name, for display
 * when the caller gave no label ("/x/docker-ID.scope" gives "ID", "/c1"
 * gives "c1"), as a new string; NULL for "/" or when out of memory.
 */
char *lease_label_from_cgroup(const char *cgroup);

/*
 * Returns buf holding the part of a log line about n devices: "" for none,
 * " and N device(s)" otherwise (so that lines about GPUs only stay as they were).
 */
const char *lease_devices_note(size_t n, char *buf, size_t len);

/* Returns the name to show for l: its label, or its cgroup path when it has none. */
const char *lease_label(const struct lease *l);

#endif
