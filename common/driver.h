/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The NVIDIA driver's user space on the host: the version the kernel module
 * reports and the libraries and tools of that version, grouped by the
 * capabilities NVIDIA_DRIVER_CAPABILITIES names. A container granted a GPU
 * needs exactly these, matching the host's module; devgate mounts them in
 * (read-only) instead of trusting the image to carry them.
 */
#ifndef DEVGATE_DRIVER_H
#define DEVGATE_DRIVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DG_DRIVER_MAX_FILES 48

enum {
	DG_DRV_UTILITY = 1 << 0,  /* nvidia-smi, NVML */
	DG_DRV_COMPUTE = 1 << 1,  /* CUDA, OpenCL, PTX JIT */
	DG_DRV_VIDEO = 1 << 2,	  /* NVENC, NVDEC, VDPAU */
	DG_DRV_GRAPHICS = 1 << 3, /* EGL, GLX, GLES, Vulkan */
	DG_DRV_ALL = (1 << 4) - 1,
};

struct dg_driver_file {
	char path[160];	   /* absolute, as on the host (and in the container) */
	char soname[64];   /* the link ld.so looks for ("libcuda.so.1"); "" for a tool */
	unsigned int caps; /* DG_DRV_* it belongs to */
};

struct dg_driver {
	char version[32]; /* "550.54.14"; "" when no driver */
	struct dg_driver_file files[DG_DRIVER_MAX_FILES];
	size_t n;
};

/* "compute,utility", "all" -> DG_DRV_* bits; -EINVAL names an unknown one in bad. */
int driver_caps_parse(const char *s, unsigned int *ret, char *bad, size_t len);
/* DG_DRV_* bits -> "utility,compute"; "" for none. */
void driver_caps_text(unsigned int caps, char *buf, size_t len);

/* The version from /proc/driver/nvidia/version's "NVRM version:" line; -EINVAL. */
int driver_version_parse(const char *text, char *ret, size_t len);

/*
 * Where glibc's loader looks when its ld.so.cache has no entry, by the
 * layouts images have, multiarch first; NULL-terminated.
 */
extern const char *const driver_ld_dirs[];

#define DG_DRIVER_TARGETS 3
#define DG_DRIVER_TARGET_MAX 256

/*
 * Where grant --driver and CDI put f in a container: its host path; for a
 * library also its soname beside it and, where the host keeps it outside
 * driver_ld_dirs (a directory only its ld.so.conf names), its soname in
 * ld_dir, the container's loader directory (NULL: none). Returns how many
 * of out's DG_DRIVER_TARGETS it filled; a path that does not fit is left out.
 */
size_t driver_targets(const struct dg_driver_file *f, const char *ld_dir,
		      char out[][DG_DRIVER_TARGET_MAX]);

/*
 * Reads the version below host_root and finds its files in the library
 * directories and /usr/bin. No driver: version "" and no files, 0.
 */
int driver_discover(int rootfd, struct dg_driver *ret);

/* What doctor says of one capability of d (found by driver_discover below rootfd). */
struct dg_driver_cap_check {
	size_t found;	   /* its files at the module's version */
	char missing[256]; /* "libcuda.so, ...": its main libraries not there */
	char other[512];   /* "/usr/lib/x/libcuda.so.535.104.05, ...": another driver's */
};

/* One DG_DRV_* bit of d checked: what is there, what is missing, what is stale. */
void driver_check_cap(int rootfd, const struct dg_driver *d, unsigned int cap,
		      struct dg_driver_cap_check *ret);

#endif
