// SPDX-License-Identifier: Apache-2.0
/*
 * NVIDIA MIG instances as the driver exposes them without NVML: a GPU in MIG
 * mode has /proc/driver/nvidia/capabilities/gpu<minor>/mig/, one giG/access
 * per GPU instance and one giG/ciC/access per compute instance; each access
 * file names the minor of a /dev/nvidia-caps/nvidia-cap<minor> node under
 * the "nvidia-caps" major. Profile names and MIG UUIDs are NVML's and are not
 * read here.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cleanup.h"
#include "gpu.h"
#include "util.h"

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

static DIR *dir_in_root(int rootfd, const char *path)
{
	int fd = open_in_root(rootfd, path, O_RDONLY | O_DIRECTORY, RESOLVE_NO_SYMLINKS);
	DIR *d;

	if (fd < 0)
		return NULL;
	d = fdopendir(fd);
	if (!d)
		close(fd);
	return d;
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
	auto_closedir DIR *d = dir_in_root(rootfd, dir);
	struct dirent *de;

	while (d && (de = readdir(d)) && gi->n_ci < DG_MAX_CI) {
		struct dg_mig_ci ci;
		char path[160];

		if (strlen(de->d_name) > 8 || id_of(de->d_name, "ci", &ci.id) < 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
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
	d = dir_in_root(rootfd, dir);
	if (!d)
		return;
	gpu->mig = true;
	while ((de = readdir(d)) && gpu->n_gi < DG_MAX_GI) {
		struct dg_mig_gi *gi = &gpu->gi[gpu->n_gi];
		char path[128];

		*gi = (struct dg_mig_gi){ 0 };
		if (strlen(de->d_name) > 8 || id_of(de->d_name, "gi", &gi->id) < 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (access_minor(rootfd, path, &gi->minor) < 0)
			continue;
		load_cis(rootfd, path, gi);
		gpu->n_gi++;
	}
	qsort(gpu->gi, gpu->n_gi, sizeof(gpu->gi[0]), cmp_gi);
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
