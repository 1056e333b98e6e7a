/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Device model: the GPUs and control nodes of a host, read from procfs,
 * sysfs and /dev under a host root ("/" or a fixture directory).
 */
#ifndef DEVGATE_GPU_H
#define DEVGATE_GPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <json-c/json.h>

#include "errors.h"

#define DG_NVIDIACTL_MINOR 255
#define DG_UVM_MINOR 0
#define DG_UVM_TOOLS_MINOR 1
#define DG_MAX_GPUS 64
#define DG_MAX_NUMA 64 /* NUMA nodes devgate tells apart */
/* Other host character devices one lease may hold (grant --device). */
#define DG_MAX_DEVICES 16
/* Nodes one lease may need: every GPU, the three control nodes, its devices. */
#define DG_MAX_NODES (DG_MAX_GPUS + 3 + DG_MAX_DEVICES)

/* A character device node under the container's /dev. */
struct dg_node {
	char name[32]; /* file name in /dev, no slashes */
	uint32_t major;
	uint32_t minor;
	uint32_t access; /* DG_ACC_* the gate allows; 0: read and write (GPU nodes) */
};

struct dg_majors {
	bool has_nvidia;
	bool has_uvm;
	uint32_t nvidia; /* "nvidia-frontend" (< 550) or "nvidia" */
	uint32_t uvm;	 /* "nvidia-uvm", dynamic */
};

struct dg_gpu {
	unsigned int index; /* position in PCI bus order */
	uint32_t minor;
	char uuid[80];
	char pci[32]; /* normalised: dddd:bb:dd.f, lower case */
	uint16_t vendor;
	uint16_t device;
	char model[128];
	const char *arch;    /* static string, "unknown" when not known */
	unsigned int cc;     /* compute capability * 10; 0: not known */
	uint64_t memory_mib; /* from the model name; 0: not known */
	int numa_node;	     /* with numa_known: the NUMA node of its PCI device */
	bool numa_known;     /* false: sysfs says -1 or nothing */
	bool excluded;	     /* outside the admin's gpu-allow list: never granted */
	bool gone;	     /* vanished since devgated saw it; kept for its leases */
	char problem[256];   /* non-empty: not grantable, and why */
};

struct dg_inventory {
	char *host_root;
	struct dg_majors majors;
	struct dg_gpu *gpus;
	size_t n_gpus;
	struct dg_node ctl[3]; /* nvidiactl, nvidia-uvm, nvidia-uvm-tools */
	size_t n_ctl;
	char ctl_problem[256]; /* non-empty: a control node on the host is wrong */
};

/* openat2 of path under rootfd with RESOLVE_IN_ROOT: a fixture's links stay inside. */
int open_in_root(int rootfd, const char *path, int flags, uint64_t resolve);

/* Parses /proc/devices text ("Character devices:" section). */
int proc_devices_parse(const char *text, struct dg_majors *ret);

/*
 * Parses /proc/driver/nvidia/gpus/<pci>/information into gpu (model, uuid,
 * pci, minor). Returns -EINVAL when "GPU UUID" or "Device Minor" is missing
 * or malformed.
 */
int gpu_info_parse(const char *text, struct dg_gpu *gpu);

/* Normalises a PCI address ("18:00.0", "00000000:18:00.0", ...). */
int pci_normalize(const char *in, char *out, size_t len);

/* A whole file below the host root, NUL-terminated, at most max bytes. */
int read_in_root(int rootfd, const char *path, size_t max, char **ret);

int inventory_discover(const char *host_root, struct dg_inventory **ret, struct dg_error *err);
void inventory_free(struct dg_inventory *inv);

/*
 * Sorts the GPUs by PCI bus id, numbers them and marks a minor used twice.
 * discover calls it; a rescan calls it again after adding the GPUs that
 * vanished (gone, never counted for duplicate minors).
 */
void inventory_order(struct dg_inventory *inv);

/*
 * What is at a node's places under the host root. node: 0 a character device
 * with the right numbers, -ENOENT absent, other -errno wrong (see problem).
 * char_link, checked only when the node is right: 0 when /dev/char/MAJ:MIN
 * resolves to it, -ENOENT absent, other -errno wrong (see link_problem).
 */
struct dg_node_check {
	int node;
	int char_link;
	char problem[256];
	char link_problem[320];
};

int inventory_check_node(const struct dg_inventory *inv, const struct dg_node *node,
			 struct dg_node_check *ret);

void gpu_node(const struct dg_inventory *inv, const struct dg_gpu *gpu, struct dg_node *ret);
/* Every node of the inventory: each GPU's, then the control nodes. */
size_t inventory_nodes(const struct dg_inventory *inv, struct dg_node *out, size_t max);

const struct dg_gpu *inventory_find_uuid(const struct dg_inventory *inv, const char *uuid);

/*
 * The node behind character device major:minor: its path ("/dev/nvidia1",
 * "/dev/nvidiactl") in path, and in *ret_gpu the GPU it is (NULL for a
 * control node). Returns false, path empty, for a device devgate does not
 * know.
 */
bool inventory_find_node(const struct dg_inventory *inv, uint32_t major, uint32_t minor, char *path,
			 size_t len, const struct dg_gpu **ret_gpu);

#endif
