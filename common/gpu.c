// SPDX-License-Identifier: Apache-2.0
/*
 * GPU discovery under a host root, and GPU selectors.
 *
 * Everything is read relative to one directory fd with RESOLVE_IN_ROOT, so a
 * fixture tree (or a compromised symlink in it) cannot make us read outside.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "cleanup.h"
#include "gpu.h"
#include "gpu_arch.h"
#include "util.h"

#define INFO_MAX ((size_t)64 * 1024)

static const char *const vendor_names[DG_VENDORS] = { "nvidia", "amd", "intel" };

const char *vendor_name(enum dg_vendor v)
{
	return (unsigned int)v < DG_VENDORS ? vendor_names[v] : "unknown";
}

int vendor_parse(const char *s, enum dg_vendor *ret)
{
	for (unsigned int i = 0; s && i < DG_VENDORS; i++) {
		if (strcasecmp(s, vendor_names[i]) == 0) {
			*ret = (enum dg_vendor)i;
			return 0;
		}
	}
	return -EINVAL;
}

int proc_devices_parse(const char *text, struct dg_majors *ret)
{
	struct dg_majors m = { 0 };
	bool in_char = false;
	const char *line = text;

	while (line && *line) {
		const char *eol = strchr(line, '\n');
		size_t len = eol ? (size_t)(eol - line) : strlen(line);
		char buf[128], name[64];
		unsigned int major;

		if (len < sizeof(buf)) {
			memcpy(buf, line, len);
			buf[len] = '\0';
			if (strcmp(buf, "Character devices:") == 0)
				in_char = true;
			else if (strcmp(buf, "Block devices:") == 0)
				in_char = false;
			else if (in_char && sscanf(buf, " %u %63s", &major, name) == 2) {
				if (strcmp(name, "nvidia-frontend") == 0 ||
				    strcmp(name, "nvidia") == 0) {
					m.has_nvidia = true;
					m.nvidia = major;
				} else if (strcmp(name, "nvidia-uvm") == 0) {
					m.has_uvm = true;
					m.uvm = major;
				} else if (strcmp(name, "kfd") == 0) {
					m.has_kfd = true;
					m.kfd = major;
				} else if (strcmp(name, "nvidia-caps") == 0) {
					m.has_caps = true;
					m.caps = major;
				}
			}
		}
		line = eol ? eol + 1 : NULL;
	}
	*ret = m;
	return 0;
}

/* "Key:   value" lines; returns a pointer into a copy owned by the caller. */
static bool info_field(char *line, const char *key, char **value)
{
	size_t klen = strlen(key);

	if (strncmp(line, key, klen) != 0 || line[klen] != ':')
		return false;
	*value = strstrip(line + klen + 1);
	return true;
}

int pci_normalize(const char *in, char *out, size_t len)
{
	unsigned int dom = 0, bus, dev, fn;
	char tail;
	int n;

	if (!in || strlen(in) > 20)
		return -EINVAL;
	for (const char *p = in; *p; p++) {
		if (!isxdigit((unsigned char)*p) && *p != ':' && *p != '.')
			return -EINVAL;
	}
	n = sscanf(in, "%x:%x:%x.%x%c", &dom, &bus, &dev, &fn, &tail);
	if (n != 4) {
		dom = 0;
		n = sscanf(in, "%x:%x.%x%c", &bus, &dev, &fn, &tail);
		if (n != 3)
			return -EINVAL;
	}
	if (dom > 0xffff || bus > 0xff || dev > 0x1f || fn > 7)
		return -EINVAL;
	n = snprintf(out, len, "%04x:%02x:%02x.%x", dom, bus, dev, fn);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int gpu_info_parse(const char *text, struct dg_gpu *gpu)
{
	auto_free char *copy = strdup(text);
	bool have_uuid = false, have_minor = false;
	char *save = NULL;

	if (!copy)
		return -ENOMEM;
	for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *v;

		if (info_field(line, "Model", &v)) {
			snprintf(gpu->model, sizeof(gpu->model), "%s", v);
		} else if (info_field(line, "GPU UUID", &v)) {
			if (strlen(v) < 8 || strlen(v) >= sizeof(gpu->uuid))
				return -EINVAL;
			for (const char *p = v; *p; p++) {
				if (!isalnum((unsigned char)*p) && *p != '-')
					return -EINVAL;
			}
			snprintf(gpu->uuid, sizeof(gpu->uuid), "%s", v);
			have_uuid = true;
		} else if (info_field(line, "Bus Location", &v)) {
			if (pci_normalize(v, gpu->pci, sizeof(gpu->pci)) < 0)
				return -EINVAL;
		} else if (info_field(line, "Device Minor", &v)) {
			if (parse_u32(v, &gpu->minor) < 0 || gpu->minor >= DG_NVIDIACTL_MINOR - 1)
				return -EINVAL;
			have_minor = true;
		}
	}
	return have_uuid && have_minor ? 0 : -EINVAL;
}

int kfd_render_minor_parse(const char *text, uint32_t *ret)
{
	const char *line = text;

	while (line && *line) {
		const char *eol = strchr(line, '\n');
		uint32_t v;
		char num[16];

		if (strncmp(line, "drm_render_minor ", 17) == 0) {
			size_t len = (eol ? (size_t)(eol - line) : strlen(line)) - 17;

			if (len == 0 || len >= sizeof(num))
				return -EINVAL;
			memcpy(num, line + 17, len);
			num[len] = '\0';
			if (parse_u32(num, &v) < 0)
				return -EINVAL;
			if (v == 0)
				return -ENOENT; /* a CPU node */
			*ret = v;
			return 0;
		}
		line = eol ? eol + 1 : NULL;
	}
	return -ENOENT;
}

int open_in_root(int rootfd, const char *path, int flags, uint64_t resolve)
{
	struct open_how how = {
		.flags = (uint64_t)(flags | O_CLOEXEC),
		.resolve = resolve | RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	long fd = syscall(SYS_openat2, rootfd, path, &how, sizeof(how));

	return fd < 0 ? -errno : (int)fd;
}

int read_in_root(int rootfd, const char *path, size_t max, char **ret)
{
	auto_close int fd = open_in_root(rootfd, path, O_RDONLY, 0);

	if (fd < 0)
		return fd;
	return read_fd_full(fd, max, ret, NULL);
}

/* sysfs numa_node: -1 (or absent) when the platform does not say. */
static void read_numa_node(int rootfd, struct dg_gpu *gpu)
{
	auto_free char *text = NULL;
	char path[96];
	int node;

	snprintf(path, sizeof(path), "sys/bus/pci/devices/%.20s/numa_node", gpu->pci);
	if (read_in_root(rootfd, path, 64, &text) < 0 || sscanf(text, "%d", &node) != 1 ||
	    node < 0 || node >= DG_MAX_NUMA)
		return;
	gpu->numa_node = node;
	gpu->numa_known = true;
}

static int read_hex16(int rootfd, const char *path, uint16_t *ret)
{
	auto_free char *text = NULL;
	unsigned int v;
	char tail;
	int r = read_in_root(rootfd, path, 64, &text);

	if (r < 0)
		return r;
	if (sscanf(text, "0x%x%c", &v, &tail) < 1 || v > 0xffff)
		return -EINVAL;
	*ret = (uint16_t)v;
	return 0;
}

/*
 * A host node is fine when absent (drivers create them lazily) or a character
 * device with the expected numbers; anything else is described in problem.
 * Returns 0 when right, -ENOENT when absent, another -errno when wrong.
 */
static int check_host_node(int rootfd, const struct dg_node *node, char *problem, size_t len)
{
	char path[64];
	struct stat st;
	auto_close int fd = -1;

	snprintf(path, sizeof(path), "dev/%s", node->name);
	fd = open_in_root(rootfd, path, O_PATH | O_NOFOLLOW, RESOLVE_NO_SYMLINKS);
	if (fd == -ENOENT)
		return -ENOENT;
	if (fd < 0) {
		snprintf(problem, len, "cannot inspect host node /dev/%s: %s", node->name,
			 strerror(-fd));
		return fd;
	}
	if (fstat(fd, &st) < 0) {
		snprintf(problem, len, "cannot stat host node /dev/%s: %m", node->name);
		return -errno;
	}
	if (!S_ISCHR(st.st_mode) || major(st.st_rdev) != node->major ||
	    minor(st.st_rdev) != node->minor) {
		snprintf(problem, len,
			 "host node /dev/%s is not character device %u:%u (found %s %u:%u)",
			 node->name, node->major, node->minor,
			 S_ISCHR(st.st_mode) ? "char device" : "a non-device file",
			 major(st.st_rdev), minor(st.st_rdev));
		return -EINVAL;
	}
	return 0;
}

/* /dev/char/MAJ:MIN must be a symlink that resolves, inside the root, to the node. */
static int check_char_link(int rootfd, const struct dg_node *node, char *problem, size_t len)
{
	char path[64], target[256];
	auto_close int lfd = -1, tfd = -1;
	struct stat st;
	ssize_t n;

	snprintf(path, sizeof(path), "dev/char/%u:%u", node->major, node->minor);
	lfd = open_in_root(rootfd, path, O_PATH | O_NOFOLLOW, 0);
	if (lfd == -ENOENT)
		return -ENOENT;
	if (lfd < 0 || fstat(lfd, &st) < 0) {
		snprintf(problem, len, "cannot inspect /%s: %s", path,
			 strerror(lfd < 0 ? -lfd : errno));
		return lfd < 0 ? lfd : -errno;
	}
	if (!S_ISLNK(st.st_mode)) {
		snprintf(problem, len, "/%s is not a symlink", path);
		return -EINVAL;
	}
	n = readlinkat(lfd, "", target, sizeof(target) - 1);
	target[n < 0 ? 0 : n] = '\0';
	tfd = open_in_root(rootfd, path, O_PATH, 0);
	if (tfd < 0 || fstat(tfd, &st) < 0 || !S_ISCHR(st.st_mode) ||
	    major(st.st_rdev) != node->major || minor(st.st_rdev) != node->minor) {
		snprintf(problem, len, "/%s points to '%.200s', not to character device %u:%u",
			 path, target, node->major, node->minor);
		return -EINVAL;
	}
	return 0;
}

int inventory_check_node(const struct dg_inventory *inv, const struct dg_node *node,
			 struct dg_node_check *ret)
{
	auto_close int rootfd = open(inv->host_root, O_PATH | O_DIRECTORY | O_CLOEXEC);

	memset(ret, 0, sizeof(*ret));
	if (rootfd < 0) {
		ret->node = -errno;
		snprintf(ret->problem, sizeof(ret->problem), "cannot open host root '%s': %m",
			 inv->host_root);
		return ret->node;
	}
	ret->node = check_host_node(rootfd, node, ret->problem, sizeof(ret->problem));
	if (ret->node == 0)
		ret->char_link =
			check_char_link(rootfd, node, ret->link_problem, sizeof(ret->link_problem));
	return ret->node;
}

void vendor_gpu_node(const struct dg_inventory *inv, enum dg_vendor v, uint32_t minor,
		     struct dg_node *ret)
{
	*ret = (struct dg_node){ .minor = minor };
	if (v == DG_VENDOR_NVIDIA) {
		snprintf(ret->name, sizeof(ret->name), "nvidia%u", minor);
		ret->major = inv->majors.nvidia;
	} else {
		snprintf(ret->name, sizeof(ret->name), "dri/renderD%u", minor);
		ret->major = DG_DRM_MAJOR;
	}
}

void card_node(uint32_t minor, struct dg_node *ret)
{
	*ret = (struct dg_node){ .major = DG_DRM_MAJOR, .minor = minor };
	snprintf(ret->name, sizeof(ret->name), "dri/card%u", minor);
}

void gpu_node(const struct dg_inventory *inv, const struct dg_gpu *gpu, struct dg_node *ret)
{
	vendor_gpu_node(inv, gpu->family, gpu->minor, ret);
}

bool inventory_guards_all(const struct dg_inventory *inv, uint32_t major)
{
	const struct dg_majors *m = &inv->majors;

	return major && ((m->has_nvidia && major == m->nvidia) || (m->has_uvm && major == m->uvm) ||
			 (m->has_kfd && major == m->kfd) || (m->has_caps && major == m->caps));
}

bool inventory_guards(const struct dg_inventory *inv, uint32_t major, uint32_t minor)
{
	if (!major)
		return false;
	if (inventory_guards_all(inv, major))
		return true;
	for (size_t i = 0; major == DG_DRM_MAJOR && i < inv->n_gpus; i++) {
		const struct dg_gpu *g = &inv->gpus[i];

		if (g->family != DG_VENDOR_NVIDIA &&
		    (g->minor == minor || (g->has_card && g->card_minor == minor)))
			return true;
	}
	return false;
}

size_t inventory_nodes(const struct dg_inventory *inv, struct dg_node *out, size_t max)
{
	size_t n = 0;

	for (size_t i = 0; i < inv->n_gpus && n < max; i++)
		gpu_node(inv, &inv->gpus[i], &out[n++]);
	for (size_t i = 0; i < inv->n_ctl && n < max; i++)
		out[n++] = inv->ctl[i];
	return n;
}

static void add_ctl(struct dg_inventory *inv, enum dg_vendor v, const char *name, uint32_t major,
		    uint32_t minor)
{
	struct dg_node *n = &inv->ctl[inv->n_ctl];

	*n = (struct dg_node){ .major = major, .minor = minor };
	inv->ctl_vendor[inv->n_ctl++] = v;
	snprintf(n->name, sizeof(n->name), "%s", name);
}

static void gpu_load(int rootfd, const struct dg_inventory *inv, const char *pci_dir,
		     struct dg_gpu *gpu)
{
	auto_free char *text = NULL;
	char path[128];
	struct dg_node node = { 0 };
	struct gpu_kind kind;
	int r;

	/* pci_dir passed pci_normalize, so it is at most 20 characters. */
	snprintf(gpu->pci, sizeof(gpu->pci), "%.20s", pci_dir);
	snprintf(path, sizeof(path), "proc/driver/nvidia/gpus/%.20s/information", pci_dir);
	r = read_in_root(rootfd, path, INFO_MAX, &text);
	if (r < 0) {
		snprintf(gpu->problem, sizeof(gpu->problem), "cannot read /%s: %s", path,
			 strerror(-r));
		return;
	}
	if (gpu_info_parse(text, gpu) < 0) {
		snprintf(gpu->problem, sizeof(gpu->problem),
			 "/%s lacks a valid \"GPU UUID\" or \"Device Minor\"", path);
		return;
	}
	snprintf(path, sizeof(path), "sys/bus/pci/devices/%.20s/vendor", gpu->pci);
	(void)read_hex16(rootfd, path, &gpu->vendor);
	snprintf(path, sizeof(path), "sys/bus/pci/devices/%.20s/device", gpu->pci);
	(void)read_hex16(rootfd, path, &gpu->device);
	read_numa_node(rootfd, gpu);
	kind = gpu_kind(gpu->vendor, gpu->device, gpu->model);
	gpu->arch = kind.arch;
	gpu->cc = kind.cc;
	gpu->memory_mib = gpu_memory_from_model(gpu->model);
	gpu_node(inv, gpu, &node);
	(void)check_host_node(rootfd, &node, gpu->problem, sizeof(gpu->problem));
	if (inv->majors.has_caps)
		mig_discover(rootfd, gpu);
}

static int cmp_gpu_pci(const void *a, const void *b)
{
	return strcmp(((const struct dg_gpu *)a)->pci, ((const struct dg_gpu *)b)->pci);
}

int opendir_in_root(int rootfd, const char *path, uint64_t resolve, DIR **ret)
{
	int dfd = open_in_root(rootfd, path, O_RDONLY | O_DIRECTORY, resolve);

	*ret = NULL;
	if (dfd == -ENOENT)
		return 0;
	if (dfd < 0)
		return dfd;
	*ret = fdopendir(dfd); /* the DIR owns the fd now */
	if (!*ret) {
		int r = -errno;

		close(dfd);
		return r;
	}
	return 0;
}

static int discover_gpus(int rootfd, struct dg_inventory *inv)
{
	auto_closedir DIR *d = NULL;
	struct dirent *de;
	int r = opendir_in_root(rootfd, "proc/driver/nvidia/gpus", RESOLVE_NO_SYMLINKS, &d);

	if (r < 0 || !d)
		return r;
	while ((de = readdir(d))) {
		struct dg_gpu *gpu;
		char pci[32];

		if (de->d_name[0] == '.' || pci_normalize(de->d_name, pci, sizeof(pci)) < 0)
			continue;
		if (inv->n_gpus == DG_MAX_GPUS)
			return -E2BIG;
		gpu = &inv->gpus[inv->n_gpus++];
		gpu->arch = "unknown";
		gpu_load(rootfd, inv, de->d_name, gpu);
	}
	return 0;
}

void inventory_order(struct dg_inventory *inv)
{
	qsort(inv->gpus, inv->n_gpus, sizeof(*inv->gpus), cmp_gpu_pci);
	for (size_t i = 0; i < inv->n_gpus; i++) {
		struct dg_gpu *g = &inv->gpus[i];

		g->index = (unsigned int)i;
		for (size_t j = 0; j < i && !g->gone; j++) {
			if (!g->problem[0] && !inv->gpus[j].gone &&
			    inv->gpus[j].family == g->family && inv->gpus[j].minor == g->minor &&
			    g->uuid[0])
				snprintf(g->problem, sizeof(g->problem),
					 "device minor %u is also used by GPU %zu", g->minor, j);
		}
	}
}

/* A few AMD and Intel data centre parts; others show as "AMD GPU" / "Intel GPU". */
static const struct {
	uint16_t vendor, device;
	const char *model;
} drm_models[] = {
	{ 0x1002, 0x738c, "AMD Instinct MI100" },
	{ 0x1002, 0x740c, "AMD Instinct MI250X" },
	{ 0x1002, 0x740f, "AMD Instinct MI210" },
	{ 0x1002, 0x74a1, "AMD Instinct MI300X" },
	{ 0x1002, 0x744c, "AMD Radeon RX 7900 XTX" },
	{ 0x8086, 0x0bd5, "Intel Data Center GPU Max 1550" },
	{ 0x8086, 0x56c0, "Intel Data Center GPU Flex 170" },
	{ 0x8086, 0x56a0, "Intel Arc A770" },
};

static void drm_model(struct dg_gpu *gpu)
{
	for (size_t i = 0; i < ARRAY_SIZE(drm_models); i++) {
		if (drm_models[i].vendor == gpu->vendor && drm_models[i].device == gpu->device) {
			snprintf(gpu->model, sizeof(gpu->model), "%s", drm_models[i].model);
			return;
		}
	}
	snprintf(gpu->model, sizeof(gpu->model), "%s GPU",
		 gpu->family == DG_VENDOR_AMD ? "AMD" : "Intel");
}

/* The PCI bus id a DRM node's "device" link names (its last component). */
static int drm_bus_id(int rootfd, const char *name, char *pci, size_t len)
{
	char path[64], target[256];
	auto_close int fd = -1;
	const char *base;
	ssize_t n;

	snprintf(path, sizeof(path), "sys/class/drm/%s", name);
	fd = open_in_root(rootfd, path, O_PATH | O_DIRECTORY, 0);
	if (fd < 0)
		return fd;
	n = readlinkat(fd, "device", target, sizeof(target) - 1);
	if (n < 0)
		return -errno;
	target[n] = '\0';
	base = strrchr(target, '/');
	return pci_normalize(base ? base + 1 : target, pci, len);
}

/* "226:128\n" in the node's dev file must be the DRM major and its own minor. */
static bool drm_dev_matches(int rootfd, const char *name, uint32_t minor)
{
	auto_free char *text = NULL;
	unsigned int maj, min;
	char path[64];

	snprintf(path, sizeof(path), "sys/class/drm/%s/dev", name);
	return read_in_root(rootfd, path, 64, &text) >= 0 &&
	       sscanf(text, "%u:%u", &maj, &min) == 2 && maj == DG_DRM_MAJOR && min == minor;
}

/* amdgpu's unique_id (a 64-bit serial) is the stable id where it exists. */
static void drm_stable_id(int rootfd, const char *name, struct dg_gpu *gpu)
{
	auto_free char *text = NULL;
	char path[80];
	bool ok;

	snprintf(gpu->uuid, sizeof(gpu->uuid), "%s", gpu->pci);
	snprintf(path, sizeof(path), "sys/class/drm/%s/device/unique_id", name);
	if (gpu->family != DG_VENDOR_AMD || read_in_root(rootfd, path, 64, &text) < 0)
		return;
	strstrip(text);
	ok = strlen(text) >= 8 && strlen(text) <= 32;
	for (const char *p = text; ok && *p; p++)
		ok = isxdigit((unsigned char)*p);
	if (ok)
		snprintf(gpu->uuid, sizeof(gpu->uuid), "AMD-%s", text);
}

/* Render minors that a KFD topology node names (AMD GPUs ROCm can use). */
static bool kfd_has_render_minor(int rootfd, uint32_t minor)
{
	auto_closedir DIR *d = NULL;
	struct dirent *de;

	if (opendir_in_root(rootfd, "sys/class/kfd/kfd/topology/nodes", 0, &d) < 0 || !d)
		return false;
	while ((de = readdir(d))) {
		auto_free char *text = NULL;
		char path[128];
		uint32_t m;

		if (de->d_name[0] == '.' || strlen(de->d_name) > 8)
			continue;
		/* The name is at most 8 bytes (above): it fits, as the check says to the compiler.
		 */
		if (snprintf(path, sizeof(path), "sys/class/kfd/kfd/topology/nodes/%s/properties",
			     de->d_name) >= (int)sizeof(path))
			continue;
		if (read_in_root(rootfd, path, INFO_MAX, &text) >= 0 &&
		    kfd_render_minor_parse(text, &m) == 0 && m == minor)
			return true;
	}
	return false;
}

/* One renderD<N>: an AMD or Intel GPU (NVIDIA's come from its own driver). */
static void drm_load(int rootfd, struct dg_inventory *inv, const char *name, uint32_t minor)
{
	struct dg_gpu gpu = { .minor = minor, .arch = "unknown" };
	char path[80];

	snprintf(path, sizeof(path), "sys/class/drm/%s/device/vendor", name);
	if (read_hex16(rootfd, path, &gpu.vendor) < 0)
		return;
	if (gpu.vendor == 0x1002)
		gpu.family = DG_VENDOR_AMD;
	else if (gpu.vendor == 0x8086)
		gpu.family = DG_VENDOR_INTEL;
	else
		return;
	snprintf(path, sizeof(path), "sys/class/drm/%s/device/device", name);
	(void)read_hex16(rootfd, path, &gpu.device);
	if (drm_bus_id(rootfd, name, gpu.pci, sizeof(gpu.pci)) < 0)
		return;
	drm_stable_id(rootfd, name, &gpu);
	drm_model(&gpu);
	if (minor > DG_DRM_MAX_MINOR)
		snprintf(gpu.problem, sizeof(gpu.problem),
			 "render minor %u is above %d, the last one devgate's gate can guard",
			 minor, DG_DRM_MAX_MINOR);
	else if (!drm_dev_matches(rootfd, name, minor))
		snprintf(gpu.problem, sizeof(gpu.problem), "/sys/class/drm/%s/dev is not %d:%u",
			 name, DG_DRM_MAJOR, minor);
	else if (gpu.family == DG_VENDOR_AMD && inv->majors.has_kfd &&
		 !kfd_has_render_minor(rootfd, minor))
		snprintf(gpu.problem, sizeof(gpu.problem),
			 "no KFD topology node names render minor %u", minor);
	if (!gpu.problem[0]) {
		struct dg_node node;

		gpu_node(inv, &gpu, &node);
		(void)check_host_node(rootfd, &node, gpu.problem, sizeof(gpu.problem));
	}
	inv->gpus[inv->n_gpus++] = gpu;
}

/* card<N>: the display node of a DRM GPU found by its render node, if any. */
static void drm_card(int rootfd, struct dg_inventory *inv, const char *name, uint32_t minor)
{
	char pci[32];

	if (minor > DG_DRM_MAX_MINOR || drm_bus_id(rootfd, name, pci, sizeof(pci)) < 0 ||
	    !drm_dev_matches(rootfd, name, minor))
		return;
	for (size_t i = 0; i < inv->n_gpus; i++) {
		struct dg_gpu *g = &inv->gpus[i];

		if (g->family != DG_VENDOR_NVIDIA && !g->has_card && strcmp(g->pci, pci) == 0) {
			g->has_card = true;
			g->card_minor = minor;
		}
	}
}

static int drm_discover(int rootfd, struct dg_inventory *inv)
{
	auto_closedir DIR *d = NULL;
	struct dirent *de;
	int r = opendir_in_root(rootfd, "sys/class/drm", 0, &d);

	if (r < 0 || !d)
		return r;
	while ((de = readdir(d))) {
		uint32_t minor;

		if (strncmp(de->d_name, "renderD", 7) != 0 ||
		    parse_u32(de->d_name + 7, &minor) < 0 || minor < DG_DRM_RENDER_BASE ||
		    minor > 0xfffff)
			continue;
		if (inv->n_gpus == DG_MAX_GPUS)
			return -E2BIG;
		drm_load(rootfd, inv, de->d_name, minor);
	}
	rewinddir(d);
	while ((de = readdir(d))) {
		uint32_t minor;

		if (strncmp(de->d_name, "card", 4) == 0 && parse_u32(de->d_name + 4, &minor) == 0 &&
		    minor < DG_DRM_RENDER_BASE)
			drm_card(rootfd, inv, de->d_name, minor);
	}
	return 0;
}

int inventory_discover(const char *host_root, struct dg_inventory **ret, struct dg_error *err)
{
	struct dg_inventory *inv;
	auto_close int rootfd = -1;
	auto_free char *devices = NULL;
	int r;

	rootfd = open(host_root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0)
		return dg_error_set(err, DG_E_INVALID, errno, "cannot open host root '%s': %m",
				    host_root);
	r = read_in_root(rootfd, "proc/devices", (size_t)1024 * 1024, &devices);
	if (r < 0)
		return dg_error_set(err, DG_E_INTERNAL, r, "cannot read %s/proc/devices: %s",
				    host_root, strerror(-r));
	inv = calloc(1, sizeof(*inv));
	if (!inv)
		return -ENOMEM;
	inv->host_root = strdup(host_root);
	inv->gpus = calloc(DG_MAX_GPUS, sizeof(*inv->gpus));
	if (!inv->host_root || !inv->gpus) {
		inventory_free(inv);
		return -ENOMEM;
	}
	proc_devices_parse(devices, &inv->majors);
	if (inv->majors.has_nvidia) {
		add_ctl(inv, DG_VENDOR_NVIDIA, "nvidiactl", inv->majors.nvidia, DG_NVIDIACTL_MINOR);
		if (inv->majors.has_uvm) {
			add_ctl(inv, DG_VENDOR_NVIDIA, "nvidia-uvm", inv->majors.uvm, DG_UVM_MINOR);
			add_ctl(inv, DG_VENDOR_NVIDIA, "nvidia-uvm-tools", inv->majors.uvm,
				DG_UVM_TOOLS_MINOR);
		}
		r = discover_gpus(rootfd, inv);
		if (r < 0) {
			inventory_free(inv);
			return dg_error_set(err, DG_E_INTERNAL, r,
					    "cannot list %s/proc/driver/nvidia/gpus: %s", host_root,
					    strerror(-r));
		}
	}
	if (inv->majors.has_kfd)
		add_ctl(inv, DG_VENDOR_AMD, "kfd", inv->majors.kfd, 0);
	for (size_t i = 0; i < inv->n_ctl && !inv->ctl_problem[0]; i++)
		(void)check_host_node(rootfd, &inv->ctl[i], inv->ctl_problem,
				      sizeof(inv->ctl_problem));
	r = drm_discover(rootfd, inv);
	if (r < 0) {
		inventory_free(inv);
		return dg_error_set(err, DG_E_INTERNAL, r, "cannot list %s/sys/class/drm: %s",
				    host_root, strerror(-r));
	}
	inventory_order(inv);
	*ret = inv;
	return 0;
}

void inventory_free(struct dg_inventory *inv)
{
	if (!inv)
		return;
	free(inv->host_root);
	free(inv->gpus);
	free(inv);
}

const struct dg_gpu *inventory_find_uuid(const struct dg_inventory *inv, const char *uuid)
{
	for (size_t i = 0; i < inv->n_gpus; i++) {
		if (inv->gpus[i].uuid[0] && strcasecmp(inv->gpus[i].uuid, uuid) == 0)
			return &inv->gpus[i];
	}
	return NULL;
}

/* A MIG capability node of a GPU instance or compute instance: its GPU is the parent. */
static bool inventory_find_cap(const struct dg_inventory *inv, uint32_t major, uint32_t minor,
			       char *path, size_t len, const struct dg_gpu **ret_gpu)
{
	for (size_t i = 0; inv->majors.has_caps && major == inv->majors.caps && i < inv->n_gpus;
	     i++) {
		for (size_t j = 0; j < inv->gpus[i].n_gi; j++) {
			const struct dg_mig_gi *gi = &inv->gpus[i].gi[j];
			bool hit = gi->minor == minor;

			for (size_t c = 0; c < gi->n_ci; c++)
				hit |= gi->ci[c].minor == minor;
			if (hit) {
				*ret_gpu = &inv->gpus[i];
				snprintf(path, len, "/dev/nvidia-caps/nvidia-cap%u", minor);
				return true;
			}
		}
	}
	return false;
}

bool inventory_find_node(const struct dg_inventory *inv, uint32_t major, uint32_t minor, char *path,
			 size_t len, const struct dg_gpu **ret_gpu)
{
	*ret_gpu = NULL;
	path[0] = '\0';
	for (size_t i = 0; i < inv->n_gpus; i++) {
		struct dg_node node;

		gpu_node(inv, &inv->gpus[i], &node);
		/* A GPU that is there now wins over a vanished one with its minor. */
		if (node.major == major && node.minor == minor && (!*ret_gpu || (*ret_gpu)->gone))
			*ret_gpu = &inv->gpus[i];
	}
	for (size_t i = 0; !*ret_gpu && major == DG_DRM_MAJOR && i < inv->n_gpus; i++) {
		const struct dg_gpu *g = &inv->gpus[i];

		if (g->family != DG_VENDOR_NVIDIA && g->has_card && g->card_minor == minor) {
			*ret_gpu = g;
			snprintf(path, len, "/dev/dri/card%u", minor);
			return true;
		}
	}
	if (*ret_gpu) {
		struct dg_node node;

		gpu_node(inv, *ret_gpu, &node);
		snprintf(path, len, "/dev/%s", node.name);
		return true;
	}
	for (size_t i = 0; i < inv->n_ctl; i++) {
		if (inv->ctl[i].major == major && inv->ctl[i].minor == minor) {
			snprintf(path, len, "/dev/%s", inv->ctl[i].name);
			return true;
		}
	}
	return inventory_find_cap(inv, major, minor, path, len, ret_gpu);
}

/* ---- MIG ---- */

/*
 * NVIDIA MIG instances as the driver exposes them without NVML: a GPU in MIG
 * mode has /proc/driver/nvidia/capabilities/gpu<minor>/mig/, one giG/access
 * per GPU instance and one giG/ciC/access per compute instance; each access
 * file names the minor of a /dev/nvidia-caps/nvidia-cap<minor> node under
 * the "nvidia-caps" major. Profile names and MIG UUIDs are NVML's and are not
 * read here.
 */
#define ACCESS_MAX 4096

int mig_access_parse(const char *text, uint32_t *ret)
{
	const char *line = text;

	while (line && *line) {
		const char *eol = strchr(line, '\n');
		size_t len = eol ? (size_t)(eol - line) : strlen(line);
		char num[16];

		if (len > 16 && strncmp(line, "DeviceFileMinor:", 16) == 0) {
			const char *v = line + 16;

			while (v < line + len && (*v == ' ' || *v == '\t'))
				v++;
			len -= (size_t)(v - line);
			if (len == 0 || len >= sizeof(num))
				return -EINVAL;
			memcpy(num, v, len);
			num[len] = '\0';
			return parse_u32(strstrip(num), ret) < 0 ? -EINVAL : 0;
		}
		line = eol ? eol + 1 : NULL;
	}
	return -EINVAL;
}

/* "gi12" or "ci0" (prefix p) -> 12, 0; -EINVAL for other names. */
static int id_of(const char *name, const char *p, uint32_t *ret)
{
	size_t n = strlen(p);

	if (strncmp(name, p, n) != 0 || !isdigit((unsigned char)name[n]))
		return -EINVAL;
	return parse_u32(name + n, ret);
}

static int access_minor(int rootfd, const char *dir, uint32_t *ret)
{
	auto_free char *text = NULL;
	char path[192];

	snprintf(path, sizeof(path), "%s/access", dir);
	if (read_in_root(rootfd, path, ACCESS_MAX, &text) < 0)
		return -ENOENT;
	return mig_access_parse(text, ret);
}

static int cmp_u32(uint32_t a, uint32_t b)
{
	return a < b ? -1 : a > b;
}

static int cmp_gi(const void *a, const void *b)
{
	return cmp_u32(((const struct dg_mig_gi *)a)->id, ((const struct dg_mig_gi *)b)->id);
}

static int cmp_ci(const void *a, const void *b)
{
	return cmp_u32(((const struct dg_mig_ci *)a)->id, ((const struct dg_mig_ci *)b)->id);
}

/* The compute instances of one GPU instance (dir: its giG directory). */
static void load_cis(int rootfd, const char *dir, struct dg_mig_gi *gi)
{
	auto_closedir DIR *d = NULL;
	struct dirent *de;

	(void)opendir_in_root(rootfd, dir, RESOLVE_NO_SYMLINKS, &d);
	while (d && (de = readdir(d)) && gi->n_ci < DG_MAX_CI) {
		struct dg_mig_ci ci = { 0 };
		char path[160];

		if (strlen(de->d_name) > 8 || id_of(de->d_name, "ci", &ci.id) < 0)
			continue;
		if (snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) >= (int)sizeof(path))
			continue;
		if (access_minor(rootfd, path, &ci.minor) == 0)
			gi->ci[gi->n_ci++] = ci;
	}
	qsort(gi->ci, gi->n_ci, sizeof(gi->ci[0]), cmp_ci);
}

void mig_discover(int rootfd, struct dg_gpu *gpu)
{
	char dir[96];
	auto_closedir DIR *d = NULL;
	struct dirent *de;

	gpu->mig = false;
	gpu->n_gi = 0;
	if (gpu->family != DG_VENDOR_NVIDIA)
		return;
	snprintf(dir, sizeof(dir), "proc/driver/nvidia/capabilities/gpu%u/mig", gpu->minor);
	if (opendir_in_root(rootfd, dir, RESOLVE_NO_SYMLINKS, &d) < 0 || !d)
		return;
	while ((de = readdir(d)) && gpu->n_gi < DG_MAX_GI) {
		struct dg_mig_gi *gi = &gpu->gi[gpu->n_gi];
		char path[128];

		*gi = (struct dg_mig_gi){ 0 };
		if (strlen(de->d_name) > 8 || id_of(de->d_name, "gi", &gi->id) < 0)
			continue;
		if (snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) >= (int)sizeof(path))
			continue;
		if (access_minor(rootfd, path, &gi->minor) < 0)
			continue;
		load_cis(rootfd, path, gi);
		gpu->n_gi++;
	}
	qsort(gpu->gi, gpu->n_gi, sizeof(gpu->gi[0]), cmp_gi);
	/* The driver keeps gpuN/mig with MIG off too (H200, 580.159): only instances tell. */
	gpu->mig = gpu->n_gi > 0;
}

const struct dg_mig_gi *mig_find_gi(const struct dg_gpu *gpu, uint32_t gi)
{
	for (size_t i = 0; i < gpu->n_gi; i++) {
		if (gpu->gi[i].id == gi)
			return &gpu->gi[i];
	}
	return NULL;
}

void mig_cap_node(const struct dg_inventory *inv, uint32_t minor, struct dg_node *ret)
{
	*ret = (struct dg_node){ .major = inv->majors.caps, .minor = minor };
	snprintf(ret->name, sizeof(ret->name), "nvidia-caps/nvidia-cap%u", minor);
}

int mig_selector_parse(const char *s, char *sel, size_t len, uint32_t *ret_gi)
{
	const char *colon = s ? strrchr(s, ':') : NULL;
	char pci[32];

	if (!colon || pci_normalize(s, pci, sizeof(pci)) == 0)
		return -ENOENT;
	if (colon == s || !colon[1] || (size_t)(colon - s) >= len)
		return -EINVAL;
	for (const char *p = colon + 1; *p; p++) {
		if (!isdigit((unsigned char)*p))
			return -EINVAL;
	}
	if (parse_u32(colon + 1, ret_gi) < 0)
		return -EINVAL;
	snprintf(sel, len, "%.*s", (int)(colon - s), s);
	return 0;
}
