// SPDX-License-Identifier: Apache-2.0
/*
 * Asks NVML for MIG profile names and MIG UUIDs (see nvml.h). devgated
 * itself never loads libnvidia-ml: the probe process it forks at start,
 * with no capabilities left and under its own seccomp allow-list, forks
 * one child per question, and devgated only parses the lines that come
 * back. A hang or crash there costs one answer; a probe that dies is
 * reaped, logged and started again. This file must not load the library
 * into devgated, nor give the probe anything beyond what the list allows.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "driver.h"
#include "log.h"
#include "nvml.h"
#include "sys/confine.h"
#include "util.h"

#define NVML_TIMEOUT_S 5
#define NVML_REPLY_MAX 16384
/* NVML's GPU instance profiles are numbered from 0; 32 covers every chip so far. */
#define NVML_PROFILE_SCAN 32
/* A probe that died is started again at most this often. */
#define NVML_RESTART_NS (10 * 1000000000ull)

static struct {
	pid_t pid;
	int sock;
	int mode;		  /* DG_SECCOMP_*: devgated's own --seccomp */
	struct sock_fprog filter; /* the probe's allow-list; none when mode is off */
	bool started;		  /* by nvml_start(), and not stopped since */
	uint64_t restarted_ns;	  /* CLOCK_MONOTONIC of the last start after a loss, or 0 */
} probe = { .sock = -1 };

/*
 * What the probe and the children it forks may call: its own loop (recv,
 * fork, wait, send), the dynamic loader's dlopen of libnvidia-ml and its
 * libraries (ld.so.cache, search paths, mappings), and what NVML needs to
 * read the driver: /proc and /sys files, /dev/nvidiactl and the GPUs'
 * nodes (open, ioctl, mmap), threads (clone3, futex), the clock and the
 * CPU mask. From the fixture's library run under strace and from what
 * glibc and NVML are documented to call; a call NVML makes beyond this
 * fails with EPERM and costs at most its answer (--seccomp=log logs it
 * instead, to find it). Left out on purpose: execve (NVML runs
 * nvidia-modprobe as root: the probe must not), mknod, mount, socket,
 * ptrace, bpf, setns and unshare.
 */
static const int probe_syscalls[] = {
	/* the probe's loop */
	SCMP_SYS(recvfrom),
	SCMP_SYS(recvmsg),
	SCMP_SYS(sendto),
	SCMP_SYS(sendmsg),
	SCMP_SYS(clone),
	SCMP_SYS(clone3),
	SCMP_SYS(fork),
	SCMP_SYS(wait4),
	SCMP_SYS(alarm),
	SCMP_SYS(kill), /* the children's own abort(); confine_own_signals() bounds them */
	SCMP_SYS(tgkill),
	SCMP_SYS(tkill),
	SCMP_SYS(seccomp), /* a child's confine_own_signals() */
	SCMP_SYS(prctl),
	SCMP_SYS(exit),
	SCMP_SYS(exit_group),
	/* dlopen, and the files NVML reads */
	SCMP_SYS(open),
	SCMP_SYS(openat),
	SCMP_SYS(close),
	SCMP_SYS(read),
	SCMP_SYS(pread64),
	SCMP_SYS(readv),
	SCMP_SYS(write),
	SCMP_SYS(writev),
	SCMP_SYS(lseek),
	SCMP_SYS(fstat),
	SCMP_SYS(stat),
	SCMP_SYS(lstat),
	SCMP_SYS(newfstatat),
	SCMP_SYS(statx),
	SCMP_SYS(statfs),
	SCMP_SYS(fstatfs),
	SCMP_SYS(access),
	SCMP_SYS(faccessat),
	SCMP_SYS(faccessat2),
	SCMP_SYS(readlink),
	SCMP_SYS(readlinkat),
	SCMP_SYS(getdents64),
	SCMP_SYS(getcwd),
	SCMP_SYS(fcntl),
	SCMP_SYS(dup),
	SCMP_SYS(ioctl),
	SCMP_SYS(poll),
	SCMP_SYS(ppoll),
	/* memory and threads */
	SCMP_SYS(brk),
	SCMP_SYS(mmap),
	SCMP_SYS(munmap),
	SCMP_SYS(mprotect),
	SCMP_SYS(mremap),
	SCMP_SYS(madvise),
	SCMP_SYS(futex),
	SCMP_SYS(set_robust_list),
	SCMP_SYS(set_tid_address),
	SCMP_SYS(rseq),
	SCMP_SYS(sched_yield),
	SCMP_SYS(sched_getaffinity),
	/* signals, time, identity */
	SCMP_SYS(rt_sigaction),
	SCMP_SYS(rt_sigprocmask),
	SCMP_SYS(rt_sigreturn),
	SCMP_SYS(sigaltstack),
	SCMP_SYS(restart_syscall),
	SCMP_SYS(clock_gettime),
	SCMP_SYS(clock_getres),
	SCMP_SYS(gettimeofday),
	SCMP_SYS(time),
	SCMP_SYS(nanosleep),
	SCMP_SYS(clock_nanosleep),
	SCMP_SYS(getpid),
	SCMP_SYS(gettid),
	SCMP_SYS(getppid),
	SCMP_SYS(getuid),
	SCMP_SYS(geteuid),
	SCMP_SYS(getgid),
	SCMP_SYS(getegid),
	SCMP_SYS(getresuid),
	SCMP_SYS(getresgid),
	SCMP_SYS(uname),
	SCMP_SYS(sysinfo),
	SCMP_SYS(getrandom),
	SCMP_SYS(getrlimit),
	SCMP_SYS(prlimit64),
};

/*
 * NVML's ABI, as its documentation gives it: opaque handles, int results
 * (0 is success), and the two structures devgate reads.
 */
typedef int nvml_ret;
typedef struct nvml_dev *nvml_dev;
typedef struct nvml_gi *nvml_gi;

struct gi_info { /* nvmlGpuInstanceInfo_t */
	nvml_dev device;
	unsigned int id;
	unsigned int profile_id;
	unsigned int start;
	unsigned int size;
};

struct gi_profile { /* nvmlGpuInstanceProfileInfo_v2_t */
	unsigned int version;
	unsigned int id;
	unsigned int p2p;
	unsigned int slices;
	unsigned int count;
	unsigned int sms;
	unsigned int copy_engines;
	unsigned int decoders;
	unsigned int encoders;
	unsigned int jpegs;
	unsigned int ofas;
	unsigned long long memory_mib;
	char name[96];
};

_Static_assert(sizeof(struct gi_profile) == 152, "nvmlGpuInstanceProfileInfo_v2_t");
#define GI_PROFILE_V2 ((unsigned int)sizeof(struct gi_profile) | 2U << 24)

struct api {
	nvml_ret (*init)(void);
	nvml_ret (*shutdown)(void);
	const char *(*error_string)(nvml_ret);
	nvml_ret (*count)(unsigned int *);
	nvml_ret (*by_index)(unsigned int, nvml_dev *);
	nvml_ret (*uuid)(nvml_dev, char *, unsigned int);
	nvml_ret (*max_mig)(nvml_dev, unsigned int *);
	nvml_ret (*mig_by_index)(nvml_dev, unsigned int, nvml_dev *);
	nvml_ret (*gi_id)(nvml_dev, unsigned int *);
	nvml_ret (*ci_id)(nvml_dev, unsigned int *);
	nvml_ret (*gi_by_id)(nvml_dev, unsigned int, nvml_gi *);
	nvml_ret (*gi_info)(nvml_gi, struct gi_info *);
	nvml_ret (*gi_profile)(nvml_dev, unsigned int, struct gi_profile *);
};

static const struct {
	const char *name;
	size_t off;
} symbols[] = {
	{ "nvmlInit_v2", offsetof(struct api, init) },
	{ "nvmlShutdown", offsetof(struct api, shutdown) },
	{ "nvmlErrorString", offsetof(struct api, error_string) },
	{ "nvmlDeviceGetCount_v2", offsetof(struct api, count) },
	{ "nvmlDeviceGetHandleByIndex_v2", offsetof(struct api, by_index) },
	{ "nvmlDeviceGetUUID", offsetof(struct api, uuid) },
	{ "nvmlDeviceGetMaxMigDeviceCount", offsetof(struct api, max_mig) },
	{ "nvmlDeviceGetMigDeviceHandleByIndex", offsetof(struct api, mig_by_index) },
	{ "nvmlDeviceGetGpuInstanceId", offsetof(struct api, gi_id) },
	{ "nvmlDeviceGetComputeInstanceId", offsetof(struct api, ci_id) },
	{ "nvmlDeviceGetGpuInstanceById", offsetof(struct api, gi_by_id) },
	{ "nvmlGpuInstanceGetInfo", offsetof(struct api, gi_info) },
	{ "nvmlDeviceGetGpuInstanceProfileInfoV", offsetof(struct api, gi_profile) },
};

static char out[NVML_REPLY_MAX];
static size_t out_len;

__attribute__((format(printf, 1, 2))) static void emit(const char *fmt, ...)
{
	va_list ap;
	int w;

	va_start(ap, fmt);
	w = vsnprintf(out + out_len, sizeof(out) - out_len, fmt, ap);
	va_end(ap);
	if (w > 0 && (size_t)w < sizeof(out) - out_len)
		out_len += (size_t)w;
}

static int load_api(void *h, struct api *api)
{
	for (size_t i = 0; i < ARRAY_SIZE(symbols); i++) {
		void *f = dlsym(h, symbols[i].name);

		if (!f) {
			emit("err the library has no %s\n", symbols[i].name);
			return -ENOENT;
		}
		memcpy((char *)api + symbols[i].off, &f, sizeof(f));
	}
	return 0;
}

/*
 * Returns the profile part of an NVML name ("MIG 1g.18gb" gives
 * "1g.18gb"), or "-" when what is left is not a plain word.
 */
static const char *profile_word(char *name)
{
	char *p = strncmp(name, "MIG ", 4) == 0 ? name + 4 : name;

	name[sizeof(((struct gi_profile *)0)->name) - 1] = '\0';
	if (!p[0] || p[strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
				 "0123456789.+_-")] != '\0')
		return "-";
	return p;
}

/* Returns the profile name of GPU instance gi of parent, or "-" when NVML will not say. */
static const char *profile_of(const struct api *api, nvml_dev parent, unsigned int gi,
			      struct gi_profile *info)
{
	struct gi_info gii;
	nvml_gi h;

	if (api->gi_by_id(parent, gi, &h) != 0 || api->gi_info(h, &gii) != 0)
		return "-";
	for (unsigned int p = 0; p < NVML_PROFILE_SCAN; p++) {
		memset(info, 0, sizeof(*info));
		info->version = GI_PROFILE_V2;
		if (api->gi_profile(parent, p, info) == 0 && info->id == gii.profile_id)
			return profile_word(info->name);
	}
	return "-";
}

static void list_mig(const struct api *api, nvml_dev parent, const char *uuid)
{
	unsigned int max = 0;

	/* Not MIG-capable, or not in MIG mode: nothing to say. */
	if (api->max_mig(parent, &max) != 0)
		return;
	for (unsigned int k = 0; k < max; k++) {
		struct gi_profile info;
		unsigned int gi, ci;
		char mig[96];
		nvml_dev m;

		if (api->mig_by_index(parent, k, &m) != 0 || api->gi_id(m, &gi) != 0 ||
		    api->ci_id(m, &ci) != 0 || api->uuid(m, mig, sizeof(mig)) != 0)
			continue;
		mig[sizeof(mig) - 1] = '\0';
		emit("mi %s %u %u %s %s\n", uuid, gi, ci, mig, profile_of(api, parent, gi, &info));
	}
}

/*
 * Runs in the child forked for one question: loads the library, asks,
 * prints the answer's lines and returns; exiting frees the rest.
 */
static void probe_child(const char *lib)
{
	struct api api;
	unsigned int n = 0;
	nvml_ret r;
	void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);

	if (!h) {
		emit("err cannot load %s: %s\n", lib, dlerror());
		return;
	}
	if (load_api(h, &api) < 0)
		return;
	r = api.init();
	if (r != 0) {
		emit("err nvmlInit: %s\n", api.error_string(r));
		return;
	}
	if (api.count(&n) != 0)
		n = 0;
	for (unsigned int i = 0; i < n; i++) {
		char uuid[96];
		nvml_dev d;

		if (api.by_index(i, &d) != 0 || api.uuid(d, uuid, sizeof(uuid)) != 0)
			continue;
		uuid[sizeof(uuid) - 1] = '\0';
		list_mig(&api, d, uuid);
	}
	api.shutdown();
}

static void reply_text(int sock, const char *text)
{
	(void)send(sock, text, strlen(text), MSG_NOSIGNAL);
}

/* Drops every capability: NVML lists instances to any user, so none is needed. */
static int drop_everything(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct none[2] = { { 0 } };

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -errno;
	return syscall(SYS_capset, &h, none) < 0 ? -errno : 0;
}

static void serve_one(int sock, const char *lib)
{
	char why[96];
	int status;
	pid_t c = fork();

	if (c == 0) {
		if (confine_own_signals(probe.mode) < 0)
			_exit(1);
		alarm(NVML_TIMEOUT_S);
		probe_child(lib);
		reply_text(sock, out_len ? out : "none\n");
		_exit(0);
	}
	if (c < 0) {
		reply_text(sock, "err cannot fork the NVML probe\n");
		return;
	}
	while (waitpid(c, &status, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return;
	snprintf(why, sizeof(why), "err the NVML probe %s %d\n",
		 WIFSIGNALED(status) ? "died of signal" : "exited with",
		 WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
	reply_text(sock, why);
}

static void server_main(int sock, pid_t parent)
{
	char lib[PATH_MAX];

	sigset_t none;

	sigemptyset(&none);
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent || dup2(sock, 3) < 0 ||
	    sigprocmask(SIG_SETMASK, &none, NULL) < 0)
		_exit(1);
	close_range(4, ~0U, 0);
	(void)prctl(PR_SET_NAME, "devgated-nvml", 0, 0, 0);
	if (drop_everything() < 0)
		_exit(1);
	/* no_new_privs is set: no capability is needed to confine ourselves. */
	if (probe.filter.filter &&
	    syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &probe.filter) < 0)
		_exit(1);
	for (;;) {
		ssize_t n = recv(3, lib, sizeof(lib) - 1, 0);

		if (n <= 0) {
			if (n < 0 && errno == EINTR)
				continue;
			_exit(0);
		}
		lib[n] = '\0';
		serve_one(3, lib);
	}
}

/* Forks the probe. Returns 0 or a negative errno. */
static int spawn(void)
{
	int sv[2];
	pid_t parent = getpid();

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	probe.pid = fork();
	if (probe.pid < 0) {
		int e = errno;

		probe.pid = 0;
		close(sv[0]);
		close(sv[1]);
		return -e;
	}
	if (probe.pid == 0) {
		close(sv[0]);
		server_main(sv[1], parent);
	}
	close(sv[1]);
	probe.sock = sv[0];
	return 0;
}

int nvml_start(int seccomp_mode)
{
	struct dg_error err = { 0 };
	int r;

	probe.mode = seccomp_mode;
	if (seccomp_mode != DG_SECCOMP_OFF) {
		r = confine_build(
			seccomp_mode == DG_SECCOMP_LOG ? SCMP_ACT_LOG : SCMP_ACT_ERRNO(EPERM),
			probe_syscalls, ARRAY_SIZE(probe_syscalls), NULL, 0, &probe.filter, &err);
		if (r < 0) /* no probe rather than one without its filter */
			return log_warning_errno(r, "the NVML probe is not started: %s",
						 err.message);
	}
	r = spawn();
	probe.started = r == 0;
	return r;
}

void nvml_stop(void)
{
	probe.sock = safe_close(probe.sock);
	if (probe.pid > 0) {
		kill(probe.pid, SIGKILL);
		(void)waitpid(probe.pid, NULL, 0);
		probe.pid = 0;
	}
	free(probe.filter.filter);
	probe.filter = (struct sock_fprog){ 0 };
	probe.started = false;
}

/* Says how a probe's wait status ended it, into buf. */
static const char *ended(int status, char *buf, size_t len)
{
	if (WIFSIGNALED(status))
		snprintf(buf, len, "died of signal %d (%s)", WTERMSIG(status),
			 strsignal(WTERMSIG(status)));
	else
		snprintf(buf, len, "exited with status %d", WEXITSTATUS(status));
	return buf;
}

/*
 * Ends the probe that stopped answering (how: why, or its wait status),
 * reaped, so that it is no zombie, and logged.
 */
static void lost(const char *why, int status)
{
	char how[96];

	if (!why) {
		why = ended(status, how, sizeof(how));
	} else if (probe.pid > 0) {
		kill(probe.pid, SIGKILL);
		(void)waitpid(probe.pid, NULL, 0);
	}
	log_warning("the NVML probe (pid %d) %s; it is started again", (int)probe.pid, why);
	probe.pid = 0;
	probe.sock = safe_close(probe.sock);
}

void nvml_check(void)
{
	uint64_t now = now_mono_ns();
	int status = 0, r;
	pid_t w;

	if (probe.pid > 0) {
		w = waitpid(probe.pid, &status, WNOHANG);
		if (w == 0)
			return; /* running */
		lost(w < 0 ? "cannot be waited for" : NULL, status);
	}
	/* A probe that keeps dying is started again every NVML_RESTART_NS, not in a loop. */
	if (!probe.started || (probe.restarted_ns && now - probe.restarted_ns < NVML_RESTART_NS))
		return;
	probe.restarted_ns = now;
	r = spawn();
	if (r < 0)
		log_warning_errno(r, "cannot start the NVML probe again: %m");
	else
		log_info("the NVML probe runs again as pid %d", (int)probe.pid);
}

/* Returns inv's own entry for instance id of GPU uuid, or NULL when it has none. */
static struct dg_mig_gi *gi_of(struct dg_inventory *inv, const char *uuid, uint32_t id)
{
	const struct dg_gpu *gpu = inventory_find_uuid(inv, uuid);
	const struct dg_mig_gi *gi = gpu ? mig_find_gi(gpu, id) : NULL;

	return gi ? &inv->gpus[gpu - inv->gpus].gi[gi - gpu->gi] : NULL;
}

static void parse_mi(struct dg_inventory *inv, const char *uuid, uint32_t gi, uint32_t ci,
		     const char *mig, const char *profile)
{
	struct dg_mig_gi *g = gi_of(inv, uuid, gi);

	/* NVML may see an instance made after /proc was read: the next rescan has it. */
	if (!g)
		return;
	if (strcmp(profile, "-") != 0)
		snprintf(g->profile, sizeof(g->profile), "%s", profile);
	for (size_t k = 0; k < g->n_ci; k++) {
		if (g->ci[k].id == ci)
			snprintf(g->ci[k].uuid, sizeof(g->ci[k].uuid), "%s", mig);
	}
}

int nvml_parse(const char *text, struct dg_inventory *inv)
{
	auto_free char *copy = strdup(text);
	char *rest = copy, *line;

	if (!copy)
		return -ENOMEM;
	while ((line = strsep(&rest, "\n"))) {
		char uuid[80], mig[48], profile[32];
		unsigned int gi, ci;

		if (!line[0] || strcmp(line, "none") == 0)
			continue;
		if (strncmp(line, "err ", 4) == 0) {
			snprintf(inv->nvml_problem, sizeof(inv->nvml_problem), "NVML: %s",
				 line + 4);
			return -EINVAL;
		}
		if (sscanf(line, "mi %79s %u %u %47s %31s", uuid, &gi, &ci, mig, profile) != 5 ||
		    strncmp(mig, "MIG-", 4) != 0) {
			snprintf(inv->nvml_problem, sizeof(inv->nvml_problem),
				 "NVML probe: unexpected line '%.60s'", line);
			return -EINVAL;
		}
		parse_mi(inv, uuid, gi, ci, mig, profile);
	}
	return 0;
}

/*
 * Finds the running driver's libnvidia-ml under the host root and writes
 * its path, as devgated sees it, to buf; -ENOENT when there is none.
 */
static int find_library(struct dg_inventory *inv, char *buf, size_t len)
{
	auto_close int rootfd = open(inv->host_root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	const char *root = strcmp(inv->host_root, "/") == 0 ? "" : inv->host_root;
	struct dg_driver *drv = calloc(1, sizeof(*drv));

	if (!drv || rootfd < 0 || driver_discover(rootfd, drv) < 0 || !drv->version[0]) {
		snprintf(inv->nvml_problem, sizeof(inv->nvml_problem),
			 "the NVIDIA driver's version is not known (proc/driver/nvidia/version)");
		free(drv);
		return -ENOENT;
	}
	for (size_t i = 0; i < drv->n; i++) {
		if (strcmp(drv->files[i].soname, "libnvidia-ml.so.1") == 0) {
			int w = snprintf(buf, len, "%s%s", root, drv->files[i].path);

			free(drv);
			return w < 0 || (size_t)w >= len ? -ENAMETOOLONG : 0;
		}
	}
	snprintf(inv->nvml_problem, sizeof(inv->nvml_problem),
		 "no libnvidia-ml.so.%s (NVML) on the host: install the driver's utility "
		 "libraries to see profiles and MIG UUIDs",
		 drv->version);
	free(drv);
	return -ENOENT;
}

static bool has_instances(const struct dg_inventory *inv)
{
	for (size_t i = 0; i < inv->n_gpus; i++) {
		if (inv->gpus[i].n_gi)
			return true;
	}
	return false;
}

/* Reads and drops a late answer, so it is not taken for the next question's. */
static void drain(void)
{
	char junk[64];

	while (recv(probe.sock, junk, sizeof(junk), MSG_DONTWAIT) >= 0)
		;
}

static bool same_layout(const struct dg_gpu *a, const struct dg_gpu *b)
{
	if (a->n_gi != b->n_gi)
		return false;
	for (size_t k = 0; k < a->n_gi; k++) {
		const struct dg_mig_gi *x = &a->gi[k], *y = &b->gi[k];

		if (x->id != y->id || x->minor != y->minor || x->n_ci != y->n_ci)
			return false;
		for (size_t c = 0; c < x->n_ci; c++) {
			if (x->ci[c].id != y->ci[c].id)
				return false;
		}
	}
	return true;
}

static const struct dg_gpu *old_gpu(const struct dg_inventory *old, const char *uuid)
{
	const struct dg_gpu *g = inventory_find_uuid(old, uuid);

	return g && !g->gone ? g : NULL;
}

/*
 * A rescan with the MIG layout unchanged keeps what NVML said: a driver load
 * sends uevents by the dozen, and each question costs NVML's start-up.
 */
static bool reuse(struct dg_inventory *inv, const struct dg_inventory *old)
{
	if (!old || old->nvml_problem[0])
		return false;
	for (size_t i = 0; i < inv->n_gpus; i++) {
		const struct dg_gpu *was = old_gpu(old, inv->gpus[i].uuid);

		if (inv->gpus[i].n_gi && (!was || !same_layout(&inv->gpus[i], was)))
			return false;
	}
	for (size_t i = 0; i < inv->n_gpus; i++) {
		struct dg_gpu *g = &inv->gpus[i];
		const struct dg_gpu *was = g->n_gi ? old_gpu(old, g->uuid) : NULL;

		for (size_t k = 0; was && k < g->n_gi; k++) {
			memcpy(g->gi[k].profile, was->gi[k].profile, sizeof(g->gi[k].profile));
			for (size_t c = 0; c < g->gi[k].n_ci; c++)
				memcpy(g->gi[k].ci[c].uuid, was->gi[k].ci[c].uuid,
				       sizeof(g->gi[k].ci[c].uuid));
		}
	}
	return true;
}

void nvml_fill(struct dg_inventory *inv, const struct dg_inventory *old)
{
	struct pollfd p = { .fd = probe.sock, .events = POLLIN };
	char lib[PATH_MAX];
	auto_free char *reply = NULL;
	ssize_t n;

	inv->nvml_problem[0] = '\0';
	if (!has_instances(inv) || reuse(inv, old) || find_library(inv, lib, sizeof(lib)) < 0)
		return;
	nvml_check();
	p.fd = probe.sock;
	reply = malloc(NVML_REPLY_MAX + 1);
	if (probe.sock < 0 || !reply) {
		snprintf(inv->nvml_problem, sizeof(inv->nvml_problem),
			 "the NVML probe is not running");
		return;
	}
	drain();
	if (send(probe.sock, lib, strlen(lib), MSG_NOSIGNAL) < 0 ||
	    poll(&p, 1, (NVML_TIMEOUT_S + 1) * 1000) != 1 ||
	    (n = recv(probe.sock, reply, NVML_REPLY_MAX, 0)) <= 0) {
		snprintf(inv->nvml_problem, sizeof(inv->nvml_problem),
			 "the NVML probe did not answer within %d s", NVML_TIMEOUT_S + 1);
		/* Its own child's alarm ends a hang in time: the probe itself is stuck or gone. */
		lost("did not answer", 0);
		nvml_check();
		return;
	}
	reply[n] = '\0';
	if (nvml_parse(reply, inv) < 0)
		log_warning("MIG profiles and UUIDs not known: %s", inv->nvml_problem);
}
