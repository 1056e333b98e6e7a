/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Device model: the GPUs and control nodes of a host, read from procfs,
 * sysfs and /dev under a host root ("/" or a fixture directory).
 */
#ifndef DEVGATE_GPU_H
#define DEVGATE_GPU_H

#include <dirent.h>
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
/* Control nodes: nvidiactl, nvidia-uvm, nvidia-uvm-tools; AMD's kfd. */
#define DG_MAX_CTL 4
/* MIG: GPU instances per GPU (7 on an A100 or H100), compute instances per GPU instance. */
#define DG_MAX_GI 8
#define DG_MAX_CI 8
/* The capability nodes of one GPU instance: its own and one per compute instance. */
#define DG_MAX_CAPS (1 + DG_MAX_CI)
/*
 * Nodes one lease may need: every GPU (with its card, or with a MIG instance's
 * GI and CI capability nodes, one CI each), the control nodes, its devices.
 */
#define DG_MAX_NODES (3 * DG_MAX_GPUS + DG_MAX_CTL + DG_MAX_DEVICES)
/* The kernel's DRM major (include/uapi/drm/drm.h), shared by every DRM GPU. */
#define DG_DRM_MAJOR 226
/* Render nodes are DRM minors 128 and up; card nodes 0-63. */
#define DG_DRM_RENDER_BASE 128
/* The gate's bitmap of guarded DRM minors ends here (DG_GUARD_MINORS - 1). */
#define DG_DRM_MAX_MINOR 255

/* Whose driver a GPU is under: its nodes and control nodes follow. */
enum dg_vendor {
	DG_VENDOR_NVIDIA, /* /dev/nvidiaN; nvidiactl, nvidia-uvm(-tools) */
	DG_VENDOR_AMD,	  /* /dev/dri/renderD<N>; /dev/kfd */
	DG_VENDOR_INTEL,  /* /dev/dri/renderD<N> */
};
#define DG_VENDORS 3

const char *vendor_name(enum dg_vendor v);
/* "nvidia", "amd", "intel" in any case; -EINVAL otherwise. */
int vendor_parse(const char *s, enum dg_vendor *ret);

/* A character device node under the container's /dev. */
struct dg_node {
	char name[32]; /* path under /dev: a file name, or "dri/NAME" */
	uint32_t major;
	uint32_t minor;
	uint32_t access; /* DG_ACC_* the gate allows; 0: read and write (GPU nodes) */
	bool block;	 /* a block device (grant --device of an allowed disk); else char */
};

struct dg_majors {
	bool has_nvidia;
	bool has_uvm;
	uint32_t nvidia; /* "nvidia-frontend" (< 550) or "nvidia" */
	uint32_t uvm;	 /* "nvidia-uvm", dynamic */
	bool has_kfd;
	uint32_t kfd; /* "kfd", AMD's compute interface, dynamic */
	bool has_caps;
	uint32_t caps; /* "nvidia-caps": MIG's /dev/nvidia-caps/nvidia-cap<N>, dynamic */
};

/* A MIG compute instance: /proc/driver/nvidia/capabilities/gpuM/mig/giG/ciC/access. */
struct dg_mig_ci {
	uint32_t id;
	uint32_t minor; /* of /dev/nvidia-caps/nvidia-cap<minor> */
	char uuid[48];	/* NVML's "MIG-<uuid>" of this (GI, CI); "": not known */
};

/* A MIG GPU instance of a GPU, with its compute instances. */
struct dg_mig_gi {
	uint32_t id;
	uint32_t minor;	  /* of /dev/nvidia-caps/nvidia-cap<minor> */
	char profile[32]; /* NVML's profile name ("1g.18gb"); "": not known */
	size_t n_ci;
	struct dg_mig_ci ci[DG_MAX_CI];
};

struct dg_gpu {
	unsigned int index;    /* position in PCI bus order */
	enum dg_vendor family; /* whose driver: its nodes follow */
	uint32_t minor;	       /* NVIDIA: of /dev/nvidiaN; DRM: of renderD<N> */
	bool has_card;	       /* DRM: a card<N> node (display), granted on request */
	uint32_t card_minor;
	char uuid[80]; /* the stable id: UUID, else the PCI bus id */
	char pci[32];  /* normalised: dddd:bb:dd.f, lower case */
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
	bool mig;	     /* NVIDIA: in MIG mode (the driver lists its capabilities) */
	size_t n_gi;	     /* its GPU instances, by id */
	struct dg_mig_gi gi[DG_MAX_GI];
	char problem[256]; /* non-empty: not grantable, and why */
};

struct dg_inventory {
	char *host_root;
	struct dg_majors majors;
	struct dg_gpu *gpus;
	size_t n_gpus;
	struct dg_node ctl[DG_MAX_CTL]; /* nvidiactl, nvidia-uvm, nvidia-uvm-tools, kfd */
	enum dg_vendor ctl_vendor[DG_MAX_CTL];
	size_t n_ctl;
	char ctl_problem[256];	/* non-empty: a control node on the host is wrong */
	char nvml_problem[192]; /* non-empty: why MIG profiles and UUIDs are not known */
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

/*
 * A KFD topology node's properties: its "drm_render_minor" into *ret.
 * Returns -ENOENT without one (or 0: a CPU node), -EINVAL when malformed.
 */
int kfd_render_minor_parse(const char *text, uint32_t *ret);

/* A DRM GPU's card node, dri/card<N>. */
void card_node(uint32_t minor, struct dg_node *ret);
/* The node of a GPU of vendor v with that minor (nvidiaN, dri/renderD<N>). */
void vendor_gpu_node(const struct dg_inventory *inv, enum dg_vendor v, uint32_t minor,
		     struct dg_node *ret);

/*
 * Whether the gate guards major:minor: every minor of NVIDIA's and the
 * kfd's majors, and the DRM minors of the inventory's GPUs (major 226 is
 * shared with the host's own display devices, which stay the runtime's).
 */
bool inventory_guards(const struct dg_inventory *inv, uint32_t major, uint32_t minor);
/* Whether every minor of major is guarded (NVIDIA's, nvidia-uvm's, the kfd's). */
bool inventory_guards_all(const struct dg_inventory *inv, uint32_t major);

/*
 * MIG, from what the driver exposes under /proc (no NVML). An access file
 * ("DeviceFileMinor: 12\nDeviceFileMode: 292\n...") gives the minor of the
 * capability's node in *ret; -EINVAL without a valid one.
 */
int mig_access_parse(const char *text, uint32_t *ret);
/* Reads the GPU's instances (n_gi, gi[]); gpu->mig when it has any. */
void mig_discover(int rootfd, struct dg_gpu *gpu);
/* The GPU's instance gi, or NULL. */
const struct dg_mig_gi *mig_find_gi(const struct dg_gpu *gpu, uint32_t gi);
/* /dev/nvidia-caps/nvidia-cap<minor> as a node under the caps major. */
void mig_cap_node(const struct dg_inventory *inv, uint32_t minor, struct dg_node *ret);
/*
 * "SEL:GI" (GPU selector, GPU instance id) as grant --gpu takes it: 0 with
 * the GPU's selector in sel and the id in *ret_gi; -ENOENT when s is not an
 * instance selector (no ':', or a PCI bus id), -EINVAL when malformed.
 */
int mig_selector_parse(const char *s, char *sel, size_t len, uint32_t *ret_gi);

/* Normalises a PCI address ("18:00.0", "00000000:18:00.0", ...). */
int pci_normalize(const char *in, char *out, size_t len);

/* A directory under the root to list; *ret NULL (and 0) when it is absent. */
int opendir_in_root(int rootfd, const char *path, uint64_t resolve, DIR **ret);

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
