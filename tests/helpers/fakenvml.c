// SPDX-License-Identifier: Apache-2.0
/*
 * A fixture's libnvidia-ml: the few NVML calls devgated's probe makes,
 * answered from the text file beside the library (mkfixture --nvml):
 *   mi GPU-UUID GI CI MIG-UUID PROFILE-ID PROFILE-NAME
 * A line "crash" makes nvmlInit abort, "hang" makes it sleep (tests of the
 * probe's isolation); "escape" makes it try calls a library running as
 * root could abuse, and fail with the names of those that worked (tests of
 * the probe's seccomp filter). Handles are row numbers plus one; GPUs come
 * first.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_ROWS 64
#define OK 0
#define INVALID 2
#define NOT_SUPPORTED 3
#define NOT_FOUND 6
#define ESCAPED 999

struct row {
	char gpu[80];
	unsigned int gi, ci, profile;
	char mig[80];
	char name[64];
};

static struct row rows[MAX_ROWS];
static unsigned int n_rows;
static char gpus[MAX_ROWS][80];
static unsigned int n_gpus;

typedef struct dev *dev_t_;

struct gi_info {
	dev_t_ device;
	unsigned int id, profile_id, start, size;
};

struct gi_profile {
	unsigned int version, id, p2p, slices, count, sms, ces, decs, encs, jpegs, ofas;
	unsigned long long memory_mib;
	char name[96];
};

static void note_gpu(const char *uuid)
{
	for (unsigned int i = 0; i < n_gpus; i++) {
		if (strcmp(gpus[i], uuid) == 0)
			return;
	}
	if (n_gpus < MAX_ROWS)
		snprintf(gpus[n_gpus++], sizeof(gpus[0]), "%s", uuid);
}

/* The names of the calls "escape" made that were not refused with EPERM. */
static char escaped[256];

static void try_call(const char *name, long r)
{
	if (r >= 0 || errno != EPERM)
		snprintf(escaped + strlen(escaped), sizeof(escaped) - strlen(escaped), " %s", name);
	if (r >= 0 && strcmp(name, "socket") == 0)
		close((int)r);
}

/*
 * Each fails harmlessly even where it is allowed: a path that does not
 * exist, signal 0, a namespace of the probe's child that ends with it.
 */
static void escape(void)
{
	char *argv[] = { "nvidia-modprobe", NULL };

	try_call("execve", syscall(SYS_execve, "/nonexistent/nvidia-modprobe", argv, NULL));
	try_call("mknod",
		 syscall(SYS_mknodat, AT_FDCWD, "/nonexistent/nvidia0", S_IFCHR | 0666, 0));
	try_call("socket", syscall(SYS_socket, AF_UNIX, SOCK_STREAM, 0));
	try_call("unshare", syscall(SYS_unshare, CLONE_NEWUSER));
	try_call("kill", syscall(SYS_kill, 1, 0));
	try_call("tgkill", syscall(SYS_tgkill, 1, 1, 0));
	try_call("ptrace", syscall(SYS_ptrace, 0x4206 /* PTRACE_SEIZE */, 1, 0, 0));
}

static void control(const char *line)
{
	if (strncmp(line, "crash", 5) == 0)
		abort();
	if (strncmp(line, "hang", 4) == 0)
		sleep(60);
	if (strncmp(line, "escape", 6) == 0)
		escape();
}

int nvmlInit_v2(void)
{
	Dl_info self;
	char path[4096], line[512];
	FILE *f;

	if (!dladdr((void *)nvmlInit_v2, &self) || !self.dli_fname)
		return 1;
	snprintf(path, sizeof(path), "%s.fixture", self.dli_fname);
	f = fopen(path, "re");
	if (!f)
		return OK;
	while (fgets(line, sizeof(line), f) && n_rows < MAX_ROWS) {
		struct row *r = &rows[n_rows];

		control(line);
		if (sscanf(line, "mi %79s %u %u %79s %u %63s", r->gpu, &r->gi, &r->ci, r->mig,
			   &r->profile, r->name) == 6) {
			note_gpu(r->gpu);
			n_rows++;
		}
	}
	fclose(f);
	return escaped[0] ? ESCAPED : OK;
}

int nvmlShutdown(void)
{
	return OK;
}

const char *nvmlErrorString(int r)
{
	static char buf[300];

	if (r == ESCAPED) {
		snprintf(buf, sizeof(buf), "not refused:%s", escaped);
		return buf;
	}
	return r == NOT_FOUND ? "Not Found" : "fixture error";
}

int nvmlDeviceGetCount_v2(unsigned int *n)
{
	*n = n_gpus;
	return OK;
}

/* GPU i is handle i + 1; row k is handle 1000 + k. */
static dev_t_ handle(unsigned int v)
{
	return (dev_t_)(uintptr_t)v;
}

static unsigned int value(dev_t_ h)
{
	return (unsigned int)(uintptr_t)h;
}

static const struct row *row_of(dev_t_ h)
{
	unsigned int v = value(h);

	return v >= 1000 && v - 1000 < n_rows ? &rows[v - 1000] : NULL;
}

static const char *gpu_of(dev_t_ h)
{
	unsigned int v = value(h);

	return v >= 1 && v <= n_gpus ? gpus[v - 1] : NULL;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned int i, dev_t_ *h)
{
	if (i >= n_gpus)
		return INVALID;
	*h = handle(i + 1);
	return OK;
}

int nvmlDeviceGetUUID(dev_t_ h, char *buf, unsigned int len)
{
	const struct row *r = row_of(h);
	const char *g = gpu_of(h);

	if (!r && !g)
		return INVALID;
	snprintf(buf, len, "%s", r ? r->mig : g);
	return OK;
}

int nvmlDeviceGetMaxMigDeviceCount(dev_t_ h, unsigned int *n)
{
	const char *g = gpu_of(h);

	if (!g)
		return INVALID;
	*n = 7;
	return OK;
}

int nvmlDeviceGetMigDeviceHandleByIndex(dev_t_ h, unsigned int k, dev_t_ *m)
{
	const char *g = gpu_of(h);

	for (unsigned int i = 0; g && i < n_rows; i++) {
		if (strcmp(rows[i].gpu, g) == 0 && k-- == 0) {
			*m = handle(1000 + i);
			return OK;
		}
	}
	return NOT_FOUND;
}

int nvmlDeviceGetGpuInstanceId(dev_t_ h, unsigned int *id)
{
	const struct row *r = row_of(h);

	if (!r)
		return INVALID;
	*id = r->gi;
	return OK;
}

int nvmlDeviceGetComputeInstanceId(dev_t_ h, unsigned int *id)
{
	const struct row *r = row_of(h);

	if (!r)
		return INVALID;
	*id = r->ci;
	return OK;
}

int nvmlDeviceGetGpuInstanceById(dev_t_ h, unsigned int gi, void **out)
{
	const char *g = gpu_of(h);

	for (unsigned int i = 0; g && i < n_rows; i++) {
		if (strcmp(rows[i].gpu, g) == 0 && rows[i].gi == gi) {
			*out = handle(1000 + i);
			return OK;
		}
	}
	return NOT_FOUND;
}

int nvmlGpuInstanceGetInfo(void *gi, struct gi_info *info)
{
	const struct row *r = row_of(gi);

	if (!r)
		return INVALID;
	memset(info, 0, sizeof(*info));
	info->id = r->gi;
	info->profile_id = r->profile;
	return OK;
}

int nvmlDeviceGetGpuInstanceProfileInfoV(dev_t_ h, unsigned int p, struct gi_profile *info)
{
	if (!gpu_of(h) || info->version != (sizeof(*info) | 2U << 24))
		return INVALID;
	for (unsigned int i = 0; i < n_rows; i++) {
		if (rows[i].profile == p && strcmp(rows[i].name, "-") != 0) {
			info->id = p;
			snprintf(info->name, sizeof(info->name), "MIG %s", rows[i].name);
			return OK;
		}
	}
	return NOT_SUPPORTED;
}
