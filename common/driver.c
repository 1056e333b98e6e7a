// SPDX-License-Identifier: Apache-2.0
/*
 * Finds the NVIDIA driver's user-space files on the host (see driver.h):
 * the module's version, then each library and tool of that version, looked
 * up in the standard directories and the ones ld.so.conf names. It only
 * reads the host root it is given; mounting is devgated's (grant/driverfs.c)
 * and CDI's (cli/cmd_cdi.c).
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "driver.h"
#include "gpu.h"
#include "util.h"

static const char *const cap_names[] = { "utility", "compute", "video", "graphics" };

/*
 * A library of the driver: NAME.so.VERSION on disk, found by ld.so as
 * SONAME. main: the capability does not work without it (the others vary
 * between driver versions).
 */
struct lib {
	const char *name;
	const char *soname;
	unsigned int caps;
	bool main;
};

static const struct lib libs[] = {
	{ "libnvidia-ml.so", "libnvidia-ml.so.1", DG_DRV_UTILITY, true },
	{ "libnvidia-cfg.so", "libnvidia-cfg.so.1", DG_DRV_UTILITY },
	{ "libcuda.so", "libcuda.so.1", DG_DRV_COMPUTE, true },
	{ "libcudadebugger.so", "libcudadebugger.so.1", DG_DRV_COMPUTE },
	{ "libnvidia-opencl.so", "libnvidia-opencl.so.1", DG_DRV_COMPUTE },
	{ "libnvidia-ptxjitcompiler.so", "libnvidia-ptxjitcompiler.so.1", DG_DRV_COMPUTE, true },
	{ "libnvidia-nvvm.so", "libnvidia-nvvm.so.4", DG_DRV_COMPUTE },
	{ "libnvidia-gpucomp.so", "", DG_DRV_COMPUTE },
	{ "libnvidia-encode.so", "libnvidia-encode.so.1", DG_DRV_VIDEO, true },
	{ "libnvidia-opticalflow.so", "libnvidia-opticalflow.so.1", DG_DRV_VIDEO },
	{ "libnvcuvid.so", "libnvcuvid.so.1", DG_DRV_VIDEO, true },
	{ "libvdpau_nvidia.so", "libvdpau_nvidia.so.1", DG_DRV_VIDEO },
	{ "libEGL_nvidia.so", "libEGL_nvidia.so.0", DG_DRV_GRAPHICS, true },
	{ "libGLESv2_nvidia.so", "libGLESv2_nvidia.so.2", DG_DRV_GRAPHICS },
	{ "libGLESv1_CM_nvidia.so", "libGLESv1_CM_nvidia.so.1", DG_DRV_GRAPHICS },
	{ "libGLX_nvidia.so", "libGLX_nvidia.so.0", DG_DRV_GRAPHICS },
	{ "libnvidia-eglcore.so", "", DG_DRV_GRAPHICS },
	{ "libnvidia-glcore.so", "", DG_DRV_GRAPHICS, true },
	{ "libnvidia-glsi.so", "", DG_DRV_GRAPHICS },
	{ "libnvidia-tls.so", "", DG_DRV_GRAPHICS },
	{ "libnvidia-rtcore.so", "", DG_DRV_GRAPHICS },
};

static const struct {
	const char *name;
	unsigned int caps;
} tools[] = {
	{ "nvidia-smi", DG_DRV_UTILITY },
	{ "nvidia-debugdump", DG_DRV_UTILITY },
	{ "nvidia-cuda-mps-control", DG_DRV_COMPUTE },
	{ "nvidia-cuda-mps-server", DG_DRV_COMPUTE },
};

/* Where distributions put them: Debian's multiarch first, then RHEL's. */
static const char *const lib_dirs[] = {
	"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
	"/lib/x86_64-linux-gnu",
};

const char *const driver_ld_dirs[] = {
#if defined(__aarch64__)
	"/usr/lib/aarch64-linux-gnu",
	"/lib/aarch64-linux-gnu",
#else
	"/usr/lib/x86_64-linux-gnu",
	"/lib/x86_64-linux-gnu",
#endif
	"/usr/lib64",
	"/lib64",
	"/usr/lib",
	"/lib",
	NULL,
};

/* Whether path's directory is one of driver_ld_dirs. */
static bool in_ld_dirs(const char *path)
{
	const char *slash = strrchr(path, '/');

	for (size_t i = 0; slash && driver_ld_dirs[i]; i++) {
		if (strlen(driver_ld_dirs[i]) == (size_t)(slash - path) &&
		    strncmp(driver_ld_dirs[i], path, (size_t)(slash - path)) == 0)
			return true;
	}
	return false;
}

/* Tools: the distributions' place, then NVIDIA's container layout (/usr/local/nvidia). */
static const char *const tool_dirs[] = { "/usr/bin", "/usr/local/nvidia/bin", "/usr/local/bin" };

#define LD_CONF_MAX_DIRS 16
#define LD_CONF_MAX_FILES 32

struct ld_dirs {
	char v[LD_CONF_MAX_DIRS][128];
	size_t n;
};

int driver_caps_parse(const char *s, unsigned int *ret, char *bad, size_t len)
{
	unsigned int caps = 0;

	while (*s) {
		size_t n = strcspn(s, ",");
		unsigned int bit = 0;

		if (n == 3 && strncmp(s, "all", 3) == 0)
			bit = DG_DRV_ALL;
		for (size_t i = 0; i < ARRAY_SIZE(cap_names) && !bit; i++) {
			if (strlen(cap_names[i]) == n && strncmp(s, cap_names[i], n) == 0)
				bit = 1U << i;
		}
		if (!bit) {
			snprintf(bad, len, "%.*s", (int)n, s);
			return -EINVAL;
		}
		caps |= bit;
		s += n + (s[n] == ',');
	}
	if (!caps) {
		snprintf(bad, len, "%s", "");
		return -EINVAL;
	}
	*ret = caps;
	return 0;
}

void driver_caps_text(unsigned int caps, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < ARRAY_SIZE(cap_names) && off < len; i++) {
		if (caps & (1U << i))
			off += (size_t)snprintf(buf + off, len - off, "%s%s", off ? "," : "",
						cap_names[i]);
	}
}

/* Where ld.so looks for f: its soname beside it; -ENOENT for a tool. */
static int soname_path(const struct dg_driver_file *f, char *buf, size_t len)
{
	const char *slash = strrchr(f->path, '/');
	int w;

	if (!f->soname[0] || !slash)
		return -ENOENT;
	w = snprintf(buf, len, "%.*s/%s", (int)(slash - f->path), f->path, f->soname);
	return w < 0 || (size_t)w >= len ? -ENAMETOOLONG : 0;
}

size_t driver_targets(const struct dg_driver_file *f, const char *ld_dir,
		      char out[][DG_DRIVER_TARGET_MAX])
{
	size_t n = 0;
	int w;

	snprintf(out[n++], DG_DRIVER_TARGET_MAX, "%s", f->path);
	if (soname_path(f, out[n], DG_DRIVER_TARGET_MAX) < 0)
		return n;
	n++;
	/* Found through the host's ld.so.conf only: the image's loader needs it in its own. */
	if (!ld_dir || in_ld_dirs(f->path))
		return n;
	w = snprintf(out[n], DG_DRIVER_TARGET_MAX, "%s/%s", ld_dir, f->soname);
	return w > 0 && w < DG_DRIVER_TARGET_MAX ? n + 1 : n;
}

/* "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.14  Thu Feb 22 ..." */
int driver_version_parse(const char *text, char *ret, size_t len)
{
	const char *p = strstr(text, "NVRM version:");
	const char *km = p ? strstr(p, "Kernel Module") : NULL;
	size_t n;

	if (!km)
		return -EINVAL;
	p = km + strlen("Kernel Module");
	while (*p == ' ' || *p == '\t')
		p++;
	/* Open kernel modules say "Kernel Module for x86_64  550.54.14". */
	if (strncmp(p, "for ", 4) == 0) {
		p += strcspn(p + 4, " \t") + 4;
		while (*p == ' ' || *p == '\t')
			p++;
	}
	n = strspn(p, "0123456789.");
	if (n == 0 || n >= len || !isdigit((unsigned char)p[0]))
		return -EINVAL;
	memcpy(ret, p, n);
	ret[n] = '\0';
	return 0;
}

/* A regular file below the root, symlinks followed inside it. */
static bool is_file(int rootfd, const char *path)
{
	auto_close int fd = open_in_root(rootfd, path, O_PATH, 0);
	struct stat st;

	return fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
}

static void add(struct dg_driver *d, const char *path, const char *soname, unsigned int caps)
{
	struct dg_driver_file *f;

	if (d->n == DG_DRIVER_MAX_FILES)
		return;
	f = &d->files[d->n++];
	snprintf(f->path, sizeof(f->path), "%s", path);
	snprintf(f->soname, sizeof(f->soname), "%s", soname);
	f->caps = caps;
}

static bool lib_in(int rootfd, struct dg_driver *d, const struct lib *l, const char *dir)
{
	char path[160];
	int w = snprintf(path, sizeof(path), "%s/%s.%s", dir, l->name, d->version);

	if (w < 0 || (size_t)w >= sizeof(path) || !is_file(rootfd, path))
		return false;
	add(d, path, l->soname, l->caps);
	return true;
}

static void find_lib(int rootfd, struct dg_driver *d, const struct lib *l,
		     const struct ld_dirs *extra)
{
	for (size_t i = 0; i < ARRAY_SIZE(lib_dirs); i++) {
		if (lib_in(rootfd, d, l, lib_dirs[i]))
			return;
	}
	for (size_t i = 0; i < extra->n; i++) {
		if (lib_in(rootfd, d, l, extra->v[i]))
			return;
	}
}

/* An absolute directory line of an ld.so.conf file, kept once. */
static void ld_dir_add(struct ld_dirs *dirs, const char *line)
{
	if (line[0] != '/' || strlen(line) >= sizeof(dirs->v[0]) || dirs->n == LD_CONF_MAX_DIRS)
		return;
	for (size_t i = 0; i < dirs->n; i++) {
		if (strcmp(dirs->v[i], line) == 0)
			return;
	}
	snprintf(dirs->v[dirs->n++], sizeof(dirs->v[0]), "%s", line);
}

static void ld_conf_read(int rootfd, const char *path, struct ld_dirs *dirs, int depth);

static int cmp_name(const void *a, const void *b)
{
	return strcmp(a, b);
}

/* An "include DIR/PATTERN" line: the directory's matching files, in order. */
static void ld_conf_include(int rootfd, const char *pattern, struct ld_dirs *dirs, int depth)
{
	char dir[128], names[LD_CONF_MAX_FILES][64];
	const char *slash = strrchr(pattern, '/');
	struct dirent *de;
	size_t n = 0;
	DIR *dp = NULL;

	if (pattern[0] != '/' || !slash || (size_t)(slash - pattern) >= sizeof(dir))
		return;
	snprintf(dir, sizeof(dir), "%.*s", (int)(slash - pattern), pattern);
	if (opendir_in_root(rootfd, dir[0] ? dir : "/", 0, &dp) < 0 || !dp)
		return;
	while ((de = readdir(dp)) && n < LD_CONF_MAX_FILES) {
		size_t len = strlen(de->d_name);

		if (de->d_name[0] != '.' && len < sizeof(names[0]) &&
		    fnmatch(slash + 1, de->d_name, 0) == 0)
			memcpy(names[n++], de->d_name, len + 1);
	}
	closedir(dp);
	qsort(names, n, sizeof(names[0]), cmp_name);
	for (size_t i = 0; i < n; i++) {
		char path[200];
		int w = snprintf(path, sizeof(path), "%s/%s", dir, names[i]);

		if (w > 0 && (size_t)w < sizeof(path))
			ld_conf_read(rootfd, path, dirs, depth + 1);
	}
}

/* The directories an ld.so.conf names, includes followed (two levels deep). */
static void ld_conf_read(int rootfd, const char *path, struct ld_dirs *dirs, int depth)
{
	auto_free char *text = NULL;
	char *rest, *line;

	if (depth > 2 || read_in_root(rootfd, path, 65536, &text) < 0)
		return;
	rest = text;
	while ((line = strsep(&rest, "\n"))) {
		line[strcspn(line, "#")] = '\0';
		line = strstrip(line);
		if (strncmp(line, "include", 7) == 0 && isspace((unsigned char)line[7]))
			ld_conf_include(rootfd, strstrip(line + 8), dirs, depth);
		else
			ld_dir_add(dirs, line);
	}
}

/*
 * A program, not a wrapper script: a host may have /usr/bin/nvidia-smi exec
 * /usr/local/nvidia/bin/nvidia-smi (seen on an H200 host), which a container
 * given only the script cannot follow.
 */
static bool is_elf(int rootfd, const char *path)
{
	auto_close int fd = open_in_root(rootfd, path, O_RDONLY, 0);
	char magic[4];

	return fd >= 0 && read(fd, magic, sizeof(magic)) == (ssize_t)sizeof(magic) &&
	       memcmp(magic, "\177ELF", 4) == 0;
}

/* The first program of that name, else the first file (a script is better than none). */
static void find_tool(int rootfd, struct dg_driver *d, const char *name, unsigned int caps)
{
	for (int any = 0; any < 2; any++) {
		for (size_t i = 0; i < ARRAY_SIZE(tool_dirs); i++) {
			char path[160];

			snprintf(path, sizeof(path), "%s/%s", tool_dirs[i], name);
			if (is_file(rootfd, path) && (any || is_elf(rootfd, path))) {
				add(d, path, "", caps);
				return;
			}
		}
	}
}

int driver_discover(int rootfd, struct dg_driver *ret)
{
	struct ld_dirs extra = { .n = 0 };
	auto_free char *text = NULL;
	int r;

	*ret = (struct dg_driver){ .n = 0 };
	r = read_in_root(rootfd, "proc/driver/nvidia/version", 4096, &text);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	r = driver_version_parse(text, ret->version, sizeof(ret->version));
	if (r < 0)
		return r;
	ld_conf_read(rootfd, "/etc/ld.so.conf", &extra, 0);
	for (size_t i = 0; i < ARRAY_SIZE(libs); i++)
		find_lib(rootfd, ret, &libs[i], &extra);
	for (size_t i = 0; i < ARRAY_SIZE(tools); i++)
		find_tool(rootfd, ret, tools[i].name, tools[i].caps);
	return 0;
}

/* "NAME.so.1.2.3" with another version than v: a library of another driver. */
static bool other_version(const char *entry, const char *name, const char *v)
{
	size_t n = strlen(name);

	return strncmp(entry, name, n) == 0 && entry[n] == '.' &&
	       isdigit((unsigned char)entry[n + 1]) &&
	       strspn(entry + n + 1, "0123456789.") == strlen(entry + n + 1) &&
	       strcmp(entry + n + 1, v) != 0 && strchr(entry + n + 1, '.');
}

static void list_add(char *list, size_t len, const char *item)
{
	size_t off = strlen(list);

	if (off + 1 < len)
		snprintf(list + off, len - off, "%s%s", off ? ", " : "", item);
}

/* Files of lib of another version than d's in the library directories, to list. */
static void find_others(int rootfd, const struct dg_driver *d, const struct lib *l, char *list,
			size_t len)
{
	for (size_t i = 0; i < ARRAY_SIZE(lib_dirs); i++) {
		DIR *dir = NULL;
		struct dirent *e;

		if (opendir_in_root(rootfd, lib_dirs[i], 0, &dir) < 0 || !dir)
			continue;
		while ((e = readdir(dir))) {
			char path[320];

			if (!other_version(e->d_name, l->name, d->version))
				continue;
			snprintf(path, sizeof(path), "%s/%s", lib_dirs[i], e->d_name);
			list_add(list, len, path);
		}
		closedir(dir);
	}
}

static bool found(const struct dg_driver *d, const struct lib *l)
{
	char path_end[96];

	snprintf(path_end, sizeof(path_end), "/%s.%s", l->name, d->version);
	for (size_t i = 0; i < d->n; i++) {
		const char *p = d->files[i].path;
		size_t n = strlen(p), m = strlen(path_end);

		if (n >= m && strcmp(p + n - m, path_end) == 0)
			return true;
	}
	return false;
}

void driver_check_cap(int rootfd, const struct dg_driver *d, unsigned int cap,
		      struct dg_driver_cap_check *ret)
{
	*ret = (struct dg_driver_cap_check){ .found = 0 };
	for (size_t i = 0; i < d->n; i++)
		ret->found += (d->files[i].caps & cap) != 0;
	for (size_t i = 0; i < ARRAY_SIZE(libs); i++) {
		if (!(libs[i].caps & cap) || found(d, &libs[i]))
			continue;
		find_others(rootfd, d, &libs[i], ret->other, sizeof(ret->other));
		if (libs[i].main)
			list_add(ret->missing, sizeof(ret->missing), libs[i].name);
	}
}
