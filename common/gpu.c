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

void gpu_node(const struct dg_inventory *inv, const struct dg_gpu *gpu, struct dg_node *ret)
{
	snprintf(ret->name, sizeof(ret->name), "nvidia%u", gpu->minor);
	ret->major = inv->majors.nvidia;
	ret->minor = gpu->minor;
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

static void add_ctl(struct dg_inventory *inv, const char *name, uint32_t major, uint32_t minor)
{
	struct dg_node *n = &inv->ctl[inv->n_ctl++];

	*n = (struct dg_node){ .major = major, .minor = minor };
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
}

static int cmp_gpu_pci(const void *a, const void *b)
{
	return strcmp(((const struct dg_gpu *)a)->pci, ((const struct dg_gpu *)b)->pci);
}

static int discover_gpus(int rootfd, struct dg_inventory *inv)
{
	auto_close int dfd = open_in_root(rootfd, "proc/driver/nvidia/gpus", O_RDONLY | O_DIRECTORY,
					  RESOLVE_NO_SYMLINKS);
	auto_closedir DIR *d = NULL;
	struct dirent *de;

	if (dfd == -ENOENT)
		return 0;
	if (dfd < 0)
		return dfd;
	d = fdopendir(dfd);
	if (!d)
		return -errno;
	(void)TAKE_FD(dfd); /* the DIR owns it now */
	inv->gpus = calloc(DG_MAX_GPUS, sizeof(*inv->gpus));
	if (!inv->gpus)
		return -ENOMEM;
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
	inventory_order(inv);
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
			    inv->gpus[j].minor == g->minor && g->uuid[0])
				snprintf(g->problem, sizeof(g->problem),
					 "device minor %u is also used by GPU %zu", g->minor, j);
		}
	}
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
	proc_devices_parse(devices, &inv->majors);
	if (inv->majors.has_nvidia) {
		add_ctl(inv, "nvidiactl", inv->majors.nvidia, DG_NVIDIACTL_MINOR);
		if (inv->majors.has_uvm) {
			add_ctl(inv, "nvidia-uvm", inv->majors.uvm, DG_UVM_MINOR);
			add_ctl(inv, "nvidia-uvm-tools", inv->majors.uvm, DG_UVM_TOOLS_MINOR);
		}
		for (size_t i = 0; i < inv->n_ctl && !inv->ctl_problem[0]; i++)
			(void)check_host_node(rootfd, &inv->ctl[i], inv->ctl_problem,
					      sizeof(inv->ctl_problem));
		r = discover_gpus(rootfd, inv);
		if (r < 0) {
			inventory_free(inv);
			return dg_error_set(err, DG_E_INTERNAL, r,
					    "cannot list %s/proc/driver/nvidia/gpus: %s", host_root,
					    strerror(-r));
		}
	}
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

bool inventory_find_node(const struct dg_inventory *inv, uint32_t major, uint32_t minor, char *path,
			 size_t len, const struct dg_gpu **ret_gpu)
{
	*ret_gpu = NULL;
	path[0] = '\0';
	for (size_t i = 0; i < inv->n_gpus; i++) {
		/* A GPU that is there now wins over a vanished one with its minor. */
		if (inv->majors.has_nvidia && major == inv->majors.nvidia &&
		    inv->gpus[i].minor == minor && (!*ret_gpu || (*ret_gpu)->gone))
			*ret_gpu = &inv->gpus[i];
	}
	if (*ret_gpu) {
		snprintf(path, len, "/dev/nvidia%u", minor);
		return true;
	}
	for (size_t i = 0; i < inv->n_ctl; i++) {
		if (inv->ctl[i].major == major && inv->ctl[i].minor == minor) {
			snprintf(path, len, "/dev/%s", inv->ctl[i].name);
			return true;
		}
	}
	return false;
}
