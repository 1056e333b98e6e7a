// SPDX-License-Identifier: Apache-2.0
/*
 * doctor: checks this host the way devgated needs it and says in plain words
 * what is wrong and what to do. Each check is a small function that fills
 * one result; the results make one JSON document, printed as is (--json) or
 * as text.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "cgv1.h"
#include "cleanup.h"
#include "client.h"
#include "commands.h"
#include "devgate.h"
#include "doctor_ct.h"
#include "driver.h"
#include "gpu.h"
#include "jsonutil.h"
#include "paths.h"
#include "mountinfo.h"
#include "util.h"

#define MAX_PROGS 64

enum status {
	ST_OK,
	ST_SKIP,
	ST_WARN,
	ST_FAIL
}; /* by severity */

static const char *const status_names[] = { "ok", "skip", "warn", "fail" };

struct result {
	enum status status;
	char message[2048];
	char hint[512];
};

struct node_seen {
	struct dg_node node;
	struct dg_node_check check;
};

struct doctor {
	const char *host_root;
	const char *pin_root;
	const char *socket;
	unsigned int timeout_s;
	struct dg_ping_reply pong; /* devgated's answer, strings in arena */
	struct dg_error daemon_err;
	struct dg_arena arena;
	struct dg_inventory *inv; /* NULL when proc/devices is unreadable */
	struct dg_error inv_err;
	struct node_seen nodes[DG_MAX_NODES];
	size_t n_nodes;
	char *cg_mount; /* NULL without cgroup v2 */
	bool daemon_up;
	bool containers; /* --containers */
};

static void say(struct result *r, enum status st, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void say(struct result *r, enum status st, const char *fmt, ...)
{
	va_list ap;

	r->status = st;
	va_start(ap, fmt);
	vsnprintf(r->message, sizeof(r->message), fmt, ap);
	va_end(ap);
}

static void hint(struct result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void hint(struct result *r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->hint, sizeof(r->hint), fmt, ap);
	va_end(ap);
}

/* Appends "; text" to the message, for checks that list several findings. */
static void add(struct result *r, enum status st, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void add(struct result *r, enum status st, const char *fmt, ...)
{
	size_t len = strlen(r->message);
	va_list ap;

	if (st > r->status)
		r->status = st;
	if (len && len + 2 < sizeof(r->message)) {
		memcpy(r->message + len, "; ", 3);
		len += 2;
	}
	va_start(ap, fmt);
	vsnprintf(r->message + len, sizeof(r->message) - len, fmt, ap);
	va_end(ap);
}

static void check_cgroup2(struct doctor *d, struct result *r)
{
	auto_free char *text = NULL, *v1 = NULL;
	int e = read_file_at(AT_FDCWD, "/proc/self/mountinfo", (size_t)4 * 1024 * 1024, &text,
			     NULL);

	if (e == 0)
		e = mountinfo_find_cgroup2(text, mountinfo_is_cgroup2, &d->cg_mount);
	if (e == 0) {
		say(r, ST_OK, "cgroup v2 is mounted at %s", d->cg_mount);
		return;
	}
	if (e == -ENOENT && mountinfo_find_cgroup1(text, "devices", doctor_v1_usable, &v1) == 0) {
		say(r, ST_WARN,
		    "no cgroup v2 hierarchy is mounted, only cgroup v1 (devices at %s): devgated "
		    "gates through v1 devices alone (devices.allow and devices.deny), with no "
		    "per-access counters",
		    v1);
		hint(r, "for counters and BPF device programs, mount cgroup v2 beside v1 (mount -t "
			"cgroup2 none /sys/fs/cgroup/unified) and restart devgated, then the "
			"containers; or boot with systemd.unified_cgroup_hierarchy=1");
		return;
	}
	if (e == -ENOENT) {
		say(r, ST_FAIL,
		    "no cgroup v2 hierarchy is mounted; devgate works only through "
		    "cgroup v2 device programs");
		hint(r, "boot with systemd.unified_cgroup_hierarchy=1, or mount it: "
			"mount -t cgroup2 none /sys/fs/cgroup/unified");
		return;
	}
	say(r, ST_FAIL, "cannot read /proc/self/mountinfo: %s", strerror(-e));
}

/* devgated pins under PIN_ROOT, whose parent must be a bpf filesystem. */
static void check_bpffs(struct doctor *d, struct result *r)
{
	char parent[PATH_MAX];
	char *slash;

	snprintf(parent, sizeof(parent), "%s", d->pin_root);
	slash = strrchr(parent, '/');
	if (!slash || slash == parent) {
		say(r, ST_FAIL, "pin root '%s' is not a directory below a bpf filesystem",
		    d->pin_root);
		return;
	}
	*slash = '\0';
	if (path_on_bpffs(parent)) {
		say(r, ST_OK, "%s is a bpf filesystem; devgate's pins live in %s", parent,
		    d->pin_root);
		return;
	}
	if (strcmp(parent, "/sys/fs/bpf") == 0) {
		say(r, ST_WARN,
		    "no bpf filesystem is mounted on /sys/fs/bpf; devgated mounts "
		    "one when it starts, but pins vanish with that mount");
		hint(r,
		     "mount it for good: mount -t bpf bpf /sys/fs/bpf (systemd does so at boot)");
		return;
	}
	say(r, ST_FAIL, "%s is not a bpf filesystem; devgated will refuse to pin there", parent);
	hint(r, "mount one (mount -t bpf bpf %s) or choose another pin-root", parent);
}

static int silent(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	(void)level;
	(void)fmt;
	(void)ap;
	return 0;
}

static void check_bpf_device(struct doctor *d, struct result *r)
{
	int e;

	(void)d;
	libbpf_set_print(silent);
	e = libbpf_probe_bpf_prog_type(BPF_PROG_TYPE_CGROUP_DEVICE, NULL);
	if (e == 1) {
		say(r, ST_OK, "the kernel loads BPF cgroup device programs");
		return;
	}
	if (e == 0) {
		say(r, ST_FAIL, "this kernel does not support BPF cgroup device programs");
		hint(r, "devgate needs a kernel built with CONFIG_CGROUP_BPF (Linux 5.8 or later)");
		return;
	}
	say(r, ST_FAIL, "cannot load a BPF cgroup device program: %s", strerror(-e));
	if (e == -EPERM || e == -EACCES)
		hint(r, "run doctor as root; devgated needs CAP_BPF and CAP_SYS_ADMIN, and "
			"kernel.unprivileged_bpf_disabled does not matter for root");
}

static void check_driver(struct doctor *d, struct result *r)
{
	const struct dg_majors *m;

	if (!d->inv) {
		say(r, ST_FAIL, "%s", d->inv_err.message);
		return;
	}
	m = &d->inv->majors;
	if (!m->has_nvidia && d->inv->n_gpus > 0) {
		say(r, ST_SKIP, "no NVIDIA driver; the host's GPUs are AMD or Intel (drm-gpus)");
		return;
	}
	if (!m->has_nvidia) {
		say(r, ST_FAIL,
		    "no NVIDIA driver in %s/proc/devices: the nvidia kernel module is "
		    "not loaded",
		    strcmp(d->host_root, "/") ? d->host_root : "");
		hint(r, "load it with 'modprobe nvidia' (install the NVIDIA driver first if that "
			"fails)");
		return;
	}
	if (!m->has_uvm) {
		say(r, ST_WARN,
		    "NVIDIA driver loaded (major %u) but not nvidia-uvm; CUDA programs "
		    "need /dev/nvidia-uvm",
		    m->nvidia);
		hint(r, "load it with 'modprobe nvidia-uvm'");
		return;
	}
	say(r, ST_OK, "NVIDIA driver loaded: major %u (nvidia), %u (nvidia-uvm)", m->nvidia,
	    m->uvm);
}

static const struct node_seen *node_of(const struct doctor *d, const struct dg_gpu *gpu)
{
	struct dg_node node;

	gpu_node(d->inv, gpu, &node);
	for (size_t i = 0; i < d->n_nodes; i++) {
		if (d->nodes[i].node.major == node.major && d->nodes[i].node.minor == node.minor)
			return &d->nodes[i];
	}
	return NULL;
}

static size_t count_vendor(const struct dg_inventory *inv, enum dg_vendor v)
{
	size_t n = 0;

	for (size_t i = 0; i < inv->n_gpus; i++)
		n += inv->gpus[i].family == v;
	return n;
}

/* AMD and Intel GPUs (DRM render nodes), and AMD's /dev/kfd. */
static void check_drm(struct doctor *d, struct result *r)
{
	size_t amd, intel;
	const struct dg_majors *m;

	if (!d->inv) {
		say(r, ST_SKIP, "no inventory");
		return;
	}
	m = &d->inv->majors;
	amd = count_vendor(d->inv, DG_VENDOR_AMD);
	intel = count_vendor(d->inv, DG_VENDOR_INTEL);
	if (!amd && !intel) {
		say(r, ST_OK, "no AMD or Intel GPU in %s/sys/class/drm", d->host_root);
		return;
	}
	if (amd && !m->has_kfd) {
		say(r, ST_WARN,
		    "%zu AMD GPU%s, %zu Intel, but no kfd in /proc/devices: ROCm programs need "
		    "/dev/kfd",
		    amd, amd == 1 ? "" : "s", intel);
		hint(r,
		     "load amdgpu with its compute support (KFD); the render nodes work without");
		return;
	}
	say(r, ST_OK, "%zu AMD GPU%s%s, %zu Intel GPU%s (DRM major %u, render nodes)", amd,
	    amd == 1 ? "" : "s", amd ? " with /dev/kfd" : "", intel, intel == 1 ? "" : "s",
	    DG_DRM_MAJOR);
}

/* The major a caps node under the host root has, when it is a char device with the right minor. */
static bool stale_major(const struct doctor *d, const struct dg_node *n, unsigned int *ret)
{
	char path[PATH_MAX];
	struct stat st;

	snprintf(path, sizeof(path), "%s/dev/%s", d->host_root, n->name);
	if (lstat(path, &st) < 0 || !S_ISCHR(st.st_mode) || minor(st.st_rdev) != n->minor ||
	    major(st.st_rdev) == n->major)
		return false;
	*ret = major(st.st_rdev);
	return true;
}

/* One /dev/nvidia-caps node of a MIG instance; false when it is wrong (said in r). */
static bool mig_node_ok(const struct doctor *d, uint32_t minor, unsigned int *stale,
			struct result *r)
{
	struct dg_node n;
	struct dg_node_check c;
	unsigned int found;

	mig_cap_node(d->inv, minor, &n);
	if (inventory_check_node(d->inv, &n, &c) == 0)
		return true;
	if (c.node == -ENOENT)
		add(r, ST_FAIL, "/dev/%s (%u:%u) is missing", n.name, n.major, n.minor);
	else if (stale_major(d, &n, &found)) {
		add(r, ST_FAIL, "/dev/%s has major %u, a stale one: nvidia-caps is %u now", n.name,
		    found, n.major);
		*stale = found;
	} else
		add(r, ST_FAIL, "%s", c.problem);
	return false;
}

/* "gi1 (ci0), gi2 (ci0 ci1)": a GPU's instances as the driver lists them. */
static void mig_list(const struct dg_gpu *gpu, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < gpu->n_gi && off < len; i++) {
		const struct dg_mig_gi *gi = &gpu->gi[i];

		off += (size_t)snprintf(buf + off, len - off, "%sgi%u (", i ? ", " : "", gi->id);
		for (size_t j = 0; j < gi->n_ci && off < len; j++)
			off += (size_t)snprintf(buf + off, len - off, "%sci%u", j ? " " : "",
						gi->ci[j].id);
		if (off < len)
			off += (size_t)snprintf(buf + off, len - off, ")");
	}
}

/* Each GPU in MIG mode: its instances, and their /dev/nvidia-caps nodes under the caps major. */
static void check_mig(struct doctor *d, struct result *r)
{
	auto_close int root = open(d->host_root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	size_t n_mig = 0, bad = 0;
	unsigned int stale = 0;
	char found[1024] = "";

	if (!d->inv || !d->inv->majors.has_nvidia) {
		say(r, ST_SKIP, "no NVIDIA driver");
		return;
	}
	for (size_t i = 0; i < d->inv->n_gpus; i++) {
		struct dg_gpu *gpu = &d->inv->gpus[i];
		char list[512];

		/* Discovery reads MIG only under a caps major; doctor looks anyway. */
		if (!d->inv->majors.has_caps && root >= 0)
			mig_discover(root, gpu);
		if (!gpu->mig)
			continue;
		n_mig++;
		mig_list(gpu, list, sizeof(list));
		snprintf(found + strlen(found), sizeof(found) - strlen(found),
			 "%sGPU %u in MIG mode with %s", n_mig > 1 ? "; " : "", gpu->index, list);
		if (!d->inv->majors.has_caps)
			continue;
		for (size_t g = 0; g < gpu->n_gi; g++) {
			bad += !mig_node_ok(d, gpu->gi[g].minor, &stale, r);
			for (size_t c = 0; c < gpu->gi[g].n_ci; c++)
				bad += !mig_node_ok(d, gpu->gi[g].ci[c].minor, &stale, r);
		}
	}
	if (n_mig == 0) {
		say(r, ST_OK, "no GPU in MIG mode");
		return;
	}
	if (!d->inv->majors.has_caps) {
		say(r, ST_FAIL, "%s; but %s/proc/devices has no nvidia-caps major", found,
		    strcmp(d->host_root, "/") ? d->host_root : "");
		hint(r, "the nvidia module registers nvidia-caps when it loads; reload it "
			"(rmmod nvidia, modprobe nvidia) before granting MIG instances");
		return;
	}
	if (stale)
		hint(r, "the nvidia-caps major is dynamic and changed when the driver reloaded: "
			"remove /dev/nvidia-caps and let the driver make the nodes again "
			"(nvidia-modprobe -f /proc/driver/nvidia/capabilities/mig/config, then "
			"'nvidia-smi mig -lgi')");
	else if (bad)
		hint(r, "without its node no container can use an instance: "
			"'nvidia-modprobe -f /proc/driver/nvidia/capabilities/gpuM/mig/giG/access' "
			"makes one, 'nvidia-smi mig -lgi' all of them");
	if (bad)
		return;
	say(r, ST_OK, "%s; nvidia-caps major %u, its nodes in /dev/nvidia-caps", found,
	    d->inv->majors.caps);
}

/* The driver's user space: per capability, the files grant --driver would mount. */
static void check_driver_files(struct doctor *d, struct result *r)
{
	static const unsigned int caps[] = { DG_DRV_UTILITY, DG_DRV_COMPUTE, DG_DRV_VIDEO,
					     DG_DRV_GRAPHICS };
	auto_close int root = open(d->host_root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	struct dg_driver drv = { .n = 0 };
	char counts[256] = "";
	size_t off = 0;
	int e;

	if (!d->inv || !d->inv->majors.has_nvidia) {
		say(r, ST_SKIP, "no NVIDIA driver");
		return;
	}
	e = root < 0 ? -errno : driver_discover(root, &drv);
	if (e < 0) {
		say(r, ST_FAIL, "cannot read %s/proc/driver/nvidia/version: %s",
		    strcmp(d->host_root, "/") ? d->host_root : "", strerror(-e));
		return;
	}
	if (!drv.version[0]) {
		say(r, ST_SKIP, "no %s/proc/driver/nvidia/version: grant --driver is not available",
		    strcmp(d->host_root, "/") ? d->host_root : "");
		return;
	}
	for (size_t i = 0; i < ARRAY_SIZE(caps); i++) {
		struct dg_driver_cap_check c;
		char name[16];

		driver_caps_text(caps[i], name, sizeof(name));
		driver_check_cap(root, &drv, caps[i], &c);
		if (off < sizeof(counts))
			off += (size_t)snprintf(counts + off, sizeof(counts) - off, "%s%s %zu",
						off ? ", " : "", name, c.found);
		if (c.other[0])
			add(r, ST_WARN, "%s: %s of another version than the module's %s", name,
			    c.other, drv.version);
		if (c.missing[0])
			add(r, ST_WARN, "%s: %s.%s missing", name, c.missing, drv.version);
	}
	if (r->status == ST_WARN) {
		add(r, ST_WARN, "driver %s, files found: %s", drv.version, counts);
		hint(r,
		     "grant --driver mounts only what matches the loaded module: install the "
		     "user space of driver %s, or reboot (or reload the module) after an upgrade",
		     drv.version);
		return;
	}
	say(r, ST_OK, "driver %s, files found: %s", drv.version, counts);
}

static void check_gpus(struct doctor *d, struct result *r)
{
	size_t bad = 0;

	if (!d->inv || (!d->inv->majors.has_nvidia && d->inv->n_gpus == 0)) {
		say(r, ST_SKIP, "no NVIDIA driver");
		return;
	}
	if (d->inv->n_gpus == 0) {
		say(r, ST_WARN, "the driver lists no GPU in /proc/driver/nvidia/gpus");
		hint(r, "check 'nvidia-smi' and the kernel log; a GPU may have fallen off the bus");
		return;
	}
	for (size_t i = 0; i < d->inv->n_gpus; i++) {
		const struct dg_gpu *gpu = &d->inv->gpus[i];
		const struct node_seen *n = node_of(d, gpu);

		/* A wrong node is the nodes check's finding; do not say it twice. */
		if (!gpu->problem[0] || (n && n->check.node < 0 && n->check.node != -ENOENT))
			continue;
		add(r, ST_FAIL, "GPU %u (%s): %s", gpu->index, gpu->pci, gpu->problem);
		bad++;
	}
	if (bad) {
		hint(r, "devgate cannot grant a GPU it cannot identify; compare with 'nvidia-smi "
			"-q'");
		return;
	}
	say(r, ST_OK, "%zu GPU%s: %s%s", d->inv->n_gpus, d->inv->n_gpus == 1 ? "" : "s",
	    d->inv->gpus[0].model, d->inv->n_gpus > 1 ? ", ..." : "");
}

static void check_nodes(struct doctor *d, struct result *r)
{
	size_t absent = 0;

	if (d->n_nodes == 0) {
		say(r, ST_SKIP, "no NVIDIA driver");
		return;
	}
	for (size_t i = 0; i < d->n_nodes; i++) {
		const struct node_seen *n = &d->nodes[i];

		if (n->check.node == -ENOENT) {
			add(r, ST_WARN, "/dev/%s (%u:%u) is missing", n->node.name, n->node.major,
			    n->node.minor);
			absent++;
		} else if (n->check.node < 0) {
			add(r, ST_FAIL, "%s", n->check.problem);
		}
	}
	if (r->status == ST_FAIL) {
		hint(r, "remove the wrong node and let the driver make it again "
			"(nvidia-modprobe, or mknod with the numbers shown)");
	} else if (absent) {
		hint(r, "the driver makes nodes on first use; 'nvidia-smi' or 'nvidia-modprobe "
			"-u -c=0' creates them now");
	} else {
		say(r, ST_OK, "%zu device nodes in /dev with the right numbers", d->n_nodes);
	}
}

static void check_dev_char(struct doctor *d, struct result *r)
{
	size_t checked = 0;

	for (size_t i = 0; i < d->n_nodes; i++) {
		const struct node_seen *n = &d->nodes[i];

		if (n->check.node < 0)
			continue;
		checked++;
		if (n->check.char_link == -ENOENT)
			add(r, ST_WARN, "/dev/char/%u:%u is missing", n->node.major, n->node.minor);
		else if (n->check.char_link < 0)
			add(r, ST_WARN, "%s", n->check.link_problem);
	}
	if (r->status == ST_WARN) {
		hint(r,
		     "systemd finds devices through /dev/char/MAJ:MIN when it sets a cgroup's "
		     "device rules (e.g. on daemon-reload) and may cut containers off a GPU whose "
		     "link is missing; create them, e.g. ln -s ../nvidia0 /dev/char/195:0");
		return;
	}
	if (checked == 0)
		say(r, ST_SKIP, "no device node to check");
	else
		say(r, ST_OK, "/dev/char links resolve to all %zu nodes", checked);
}

static void check_daemon(struct doctor *d, struct result *r)
{
	if (!d->daemon_up) {
		say(r, ST_FAIL, "%s", d->daemon_err.message);
		hint(r, "%s", d->daemon_err.hint);
		return;
	}
	say(r, ST_OK, "devgated %s (PID %lld) answers on %s with %lld lease%s", d->pong.version,
	    (long long)d->pong.pid, d->socket, (long long)d->pong.leases,
	    d->pong.leases == 1 ? "" : "s");
}

/* Adds the device programs on cgfd that are not devgate's to r. */
static int find_foreign(int cgfd, const char *who, struct result *r)
{
	uint32_t ids[MAX_PROGS];
	char names[MAX_PROGS][BPF_OBJ_NAME_LEN] = { { 0 } };
	LIBBPF_OPTS(bpf_prog_query_opts, q, .prog_ids = ids, .prog_cnt = MAX_PROGS);
	int found = 0, beside = -1;

	if (bpf_prog_query_opts(cgfd, BPF_CGROUP_DEVICE, &q) < 0)
		return -errno;
	for (uint32_t i = 0; i < q.prog_cnt; i++) {
		struct bpf_prog_info info = { 0 };
		uint32_t len = sizeof(info);
		auto_close int fd = bpf_prog_get_fd_by_id(ids[i]);

		if (fd >= 0 && bpf_obj_get_info_by_fd(fd, &info, &len) == 0)
			memcpy(names[i], info.name, sizeof(names[i]));
		if (strcmp(names[i], "devgate_beside") == 0)
			beside = (int)i;
	}
	/* The beside gate (the default gate-mode) decides after the runtime's programs. */
	for (uint32_t i = 0; i < q.prog_cnt; i++) {
		if ((int)i <= beside || strcmp(names[i], "devgate_gate") == 0 ||
		    strcmp(names[i], "devgate_tally") == 0 || strcmp(names[i], "devgate_mark") == 0)
			continue;
		add(r, ST_WARN, "%s carries device program %u (%s) that devgate has not wrapped",
		    who, ids[i], names[i][0] ? names[i] : "no name");
		found++;
	}
	return found;
}

static int lease_cgroup_open(const struct doctor *d, const struct dg_lease_info *lease)
{
	char path[PATH_MAX];
	const char *cg = lease->cgroup;
	int n;

	if (!cg)
		return -ENOENT;
	n = snprintf(path, sizeof(path), "%s%s", d->cg_mount, cg);
	if (n < 0 || (size_t)n >= sizeof(path))
		return -ENAMETOOLONG;
	n = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return n < 0 ? -errno : n;
}

static void check_foreign(struct doctor *d, struct result *r)
{
	struct dg_request req = { .op = DG_OP_STATUS };
	struct dg_arena arena = { 0 };
	struct dg_error err = { 0 };
	union dg_reply reply;
	size_t checked = 0;

	if (!d->daemon_up || !d->cg_mount) {
		say(r, ST_SKIP, "needs devgated and cgroup v2");
		return;
	}
	if (client_request(d->socket, d->timeout_s, &req, &reply, &arena, &err) < 0) {
		say(r, ST_FAIL, "%s", err.message);
		return;
	}
	for (size_t i = 0; i < reply.status.n_leases; i++) {
		const struct dg_lease_info *l = &reply.status.leases[i];
		const char *label = l->container;
		auto_close int cgfd = lease_cgroup_open(d, l);
		char who[512];
		int e;

		if (cgfd < 0)
			continue; /* the container just ended; devgated releases it */
		snprintf(who, sizeof(who), "cgroup %s%s%s%s", l->cgroup, label ? " (" : "",
			 label ? label : "", label ? ")" : "");
		e = find_foreign(cgfd, who, r);
		if (e < 0)
			add(r, ST_FAIL, "cannot query the device programs of %s: %s", who,
			    strerror(-e));
		checked++;
	}
	dg_arena_free(&arena);
	if (r->status == ST_WARN)
		hint(r, "devgated wraps such programs at its next re-check (recheck-ms, 1 s by "
			"default); if one stays, see devgated's log");
	else if (r->status == ST_OK)
		say(r, ST_OK, "no foreign device program on %zu leased cgroup%s", checked,
		    checked == 1 ? "" : "s");
}

/*
 * One lease: which layers decide its devices (v2 BPF always; v1 devices
 * where its process has a restricted v1 devices cgroup), and whether the
 * v1 list allows each of its GPUs' nodes.
 */
static void mechanism_of(struct doctor *d, const char *v1mnt, const struct dg_lease_info *l,
			 struct result *r)
{
	auto_free char *text = NULL, *path = NULL, *list = NULL;
	char file[PATH_MAX], who[512];
	size_t missing = 0;

	snprintf(who, sizeof(who), "%s%s%s%s", l->cgroup, l->container ? " (" : "",
		 l->container ? l->container : "", l->container ? ")" : "");
	snprintf(file, sizeof(file), "/proc/%lld/cgroup", (long long)l->pid);
	if (!v1mnt || l->pid <= 0 || read_file_at(AT_FDCWD, file, 65536, &text, NULL) < 0 ||
	    cgv1_devices_parse(text, &path) < 0 || strcmp(path, "/") == 0) {
		add(r, d->cg_mount ? ST_OK : ST_FAIL, "%s: %s", who,
		    d->cg_mount ? "v2 BPF gate" : "no cgroup v2 and no v1 devices cgroup");
		return;
	}
	snprintf(file, sizeof(file), "%s%s/devices.list", v1mnt, path);
	if (read_file_at(AT_FDCWD, file, (size_t)1024 * 1024, &list, NULL) < 0) {
		add(r, ST_WARN, "%s: cannot read %s", who, file);
		return;
	}
	for (size_t i = 0; d->inv && i < l->n_gpus; i++) {
		const struct dg_gpu *gpu = inventory_find_uuid(d->inv, l->gpus[i].gpu.uuid);
		struct dg_node node;
		int acc;

		if (!gpu)
			continue;
		gpu_node(d->inv, gpu, &node);
		acc = cgv1_list_access(list, 'c', node.major, node.minor);
		if (acc < 0 ||
		    (acc & (DG_ACC_READ | DG_ACC_WRITE)) != (DG_ACC_READ | DG_ACC_WRITE)) {
			add(r, ST_FAIL, "%s: %s %s%s, whose list does not allow /dev/%s (c %u:%u)",
			    who, d->cg_mount ? "v2 BPF gate and v1 devices" : "v1 devices", path,
			    d->cg_mount ? "" : " (no cgroup v2)", node.name, node.major,
			    node.minor);
			missing++;
		}
	}
	if (!missing)
		add(r, ST_OK, "%s: %s %s%s, which allows its GPUs", who,
		    d->cg_mount ? "v2 BPF gate and v1 devices" : "v1 devices", path,
		    d->cg_mount ? "" : " (no cgroup v2)");
}

/* Which mechanism devgate uses for each leased container, and whether it holds. */
static void check_mechanism(struct doctor *d, struct result *r)
{
	struct dg_request req = { .op = DG_OP_STATUS };
	struct dg_arena arena = { 0 };
	struct dg_error err = { 0 };
	auto_free char *mi = NULL, *v1mnt = NULL;
	union dg_reply reply;

	if (read_file_at(AT_FDCWD, "/proc/self/mountinfo", (size_t)4 * 1024 * 1024, &mi, NULL) == 0)
		(void)mountinfo_find_cgroup1(mi, "devices", doctor_v1_usable, &v1mnt);
	if (!d->daemon_up) {
		say(r, ST_SKIP, "needs devgated; cgroup v1 devices %s",
		    v1mnt ? v1mnt : "not mounted");
		return;
	}
	if (client_request(d->socket, d->timeout_s, &req, &reply, &arena, &err) < 0) {
		say(r, ST_FAIL, "%s", err.message);
		return;
	}
	for (size_t i = 0; i < reply.status.n_leases; i++)
		mechanism_of(d, v1mnt, &reply.status.leases[i], r);
	dg_arena_free(&arena);
	if (r->status == ST_FAIL)
		hint(r, "devgated puts its v1 rules back at its next heal check (heal-ms); if the "
			"list stays short, see devgated's log");
	else if (!r->message[0] && !d->cg_mount)
		say(r, v1mnt ? ST_OK : ST_FAIL, "no lease; %s%s%s",
		    v1mnt ? "with no cgroup v2, containers get v1 devices rules alone, in their "
			    "v1 devices cgroup under "
			  : "no grant can be had: no cgroup v2 and no v1 devices controller",
		    v1mnt ? v1mnt : "", v1mnt ? " (no per-access counters)" : "");
	else if (!r->message[0])
		say(r, ST_OK, "no lease; containers get the v2 BPF gate%s%s",
		    v1mnt ? ", and v1 devices rules where in a v1 devices cgroup under " : "",
		    v1mnt ? v1mnt : "");
}

struct check {
	const char *name;
	void (*run)(struct doctor *d, struct result *r);
};

/* In order: later checks use what earlier ones found. */
static const struct check checks[] = {
	{ "cgroup2", check_cgroup2 },
	{ "bpffs", check_bpffs },
	{ "bpf-device", check_bpf_device },
	{ "driver", check_driver },
	{ "driver-files", check_driver_files },
	{ "gpus", check_gpus },
	{ "mig", check_mig },
	{ "drm-gpus", check_drm },
	{ "nodes", check_nodes },
	{ "dev-char", check_dev_char },
	{ "daemon", check_daemon },
	{ "foreign-progs", check_foreign },
	{ "mechanism", check_mechanism },
};

static void inspect_nodes(struct doctor *d)
{
	const struct dg_inventory *inv = d->inv;

	if (!inv)
		return;
	for (size_t i = 0; i < inv->n_gpus && d->n_nodes < DG_MAX_NODES; i++)
		gpu_node(inv, &inv->gpus[i], &d->nodes[d->n_nodes++].node);
	for (size_t i = 0; i < inv->n_ctl && d->n_nodes < DG_MAX_NODES; i++)
		d->nodes[d->n_nodes++].node = inv->ctl[i];
	for (size_t i = 0; i < d->n_nodes; i++)
		(void)inventory_check_node(inv, &d->nodes[i].node, &d->nodes[i].check);
}

/* --containers: one more check, and the containers it found in the report. */
static enum status add_containers(struct doctor *d, json_object *report, json_object *results)
{
	json_object *c = json_object_new_object(), *found = NULL;
	struct result r = { 0 };
	bool failed = false;

	if (!d->daemon_up)
		say(&r, ST_FAIL, "needs devgated: it asks the runtimes devgate.conf names");
	else
		found = doctor_containers(d->socket, d->timeout_s, d->cg_mount, d->inv, &failed,
					  r.message, sizeof(r.message), r.hint, sizeof(r.hint));
	if (d->daemon_up)
		r.status = !found || failed ? ST_FAIL : ST_OK;
	json_object_object_add(c, "name", json_object_new_string("containers"));
	json_object_object_add(c, "status", json_object_new_string(status_names[r.status]));
	json_object_object_add(c, "message", json_object_new_string(r.message));
	if (r.hint[0] && r.status != ST_OK)
		json_object_object_add(c, "hint", json_object_new_string(r.hint));
	json_object_array_add(results, c);
	json_object_object_add(report, "containers", found ? found : json_object_new_array());
	return r.status;
}

static json_object *run_checks(struct doctor *d, enum status *ret)
{
	json_object *o = json_object_new_object(), *list = json_object_new_array();
	enum status worst = ST_OK;

	if (inventory_discover(d->host_root, &d->inv, &d->inv_err) == 0)
		inspect_nodes(d);
	for (size_t i = 0; i < ARRAY_SIZE(checks); i++) {
		struct result r = { 0 };
		json_object *c = json_object_new_object();

		checks[i].run(d, &r);
		if (r.status > worst)
			worst = r.status;
		json_object_object_add(c, "name", json_object_new_string(checks[i].name));
		json_object_object_add(c, "status", json_object_new_string(status_names[r.status]));
		json_object_object_add(c, "message", json_object_new_string(r.message));
		if (r.hint[0] && r.status != ST_OK)
			json_object_object_add(c, "hint", json_object_new_string(r.hint));
		json_object_array_add(list, c);
	}
	if (d->containers) {
		enum status st = add_containers(d, o, list);

		worst = st > worst ? st : worst;
	}
	if (worst == ST_SKIP)
		worst = ST_OK;
	json_object_object_add(o, "status", json_object_new_string(status_names[worst]));
	json_object_object_add(o, "checks", list);
	*ret = worst;
	return o;
}

static void render_doctor(json_object *o)
{
	json_object *list = json_object_object_get(o, "checks");
	size_t n = json_object_array_length(list), count[ARRAY_SIZE(status_names)] = { 0 };

	for (size_t i = 0; i < n; i++) {
		json_object *c = json_object_array_get_idx(list, i);
		const char *st = json_get_str(c, "status");

		for (size_t s = 0; s < ARRAY_SIZE(status_names); s++)
			count[s] += strcmp(st, status_names[s]) == 0;
		printf("%-4s  %-13s  %s\n", st, json_get_str(c, "name"),
		       json_get_str(c, "message"));
		if (json_get_str(c, "hint"))
			printf("%21shint: %s\n", "", json_get_str(c, "hint"));
	}
	list = json_object_object_get(o, "containers");
	for (size_t i = 0; list && i < json_object_array_length(list); i++) {
		json_object *c = json_object_array_get_idx(list, i);

		printf("%21s%s %s (cgroup %s, PID %lld): %s\n", "", json_get_str(c, "runtime"),
		       json_get_str(c, "name"), json_get_str(c, "cgroup"),
		       (long long)json_object_get_int64(json_object_object_get(c, "pid")),
		       json_get_str(c, "mechanism"));
	}
	printf("\n%zu ok, %zu warning%s, %zu failed, %zu skipped\n", count[ST_OK], count[ST_WARN],
	       count[ST_WARN] == 1 ? "" : "s", count[ST_FAIL], count[ST_SKIP]);
}

/*
 * A running devgated says which host root and pin root it really uses;
 * those win over the defaults, never over what the user gave.
 */
static void ask_daemon(struct doctor *d, bool take_host, bool take_pins)
{
	struct dg_request req = { .op = DG_OP_PING };
	union dg_reply reply;

	if (client_request(d->socket, d->timeout_s, &req, &reply, &d->arena, &d->daemon_err) < 0)
		return;
	d->daemon_up = true;
	d->pong = reply.ping;
	if (!d->pong.has_settings)
		return;
	if (take_host)
		d->host_root = d->pong.settings.host_root;
	if (take_pins)
		d->pin_root = d->pong.settings.pin_root;
}

static const char doctor_help[] =
	"Usage: devgatectl [-s SOCKET] doctor [--host-root DIR] [--pin-root DIR] [--containers]\n"
	"                  [--json]\n"
	"\n"
	"Checks what devgate needs from this host and says what is wrong and what to do:\n"
	"cgroup v2, bpffs, BPF device programs, the NVIDIA driver's majors and user-space\n"
	"files per capability, GPUs, MIG instances and their /dev/nvidia-caps nodes, device\n"
	"nodes and their /dev/char links, devgated itself, and device programs on leased\n"
	"cgroups that devgate has not wrapped. Run it as root.\n"
	"Exit status: 0 when no check failed (warnings allowed), 1 when one did.\n"
	"\n"
	"      --host-root DIR    read /proc/devices, /proc/driver/nvidia and /dev under DIR\n"
	"                         (default: the running devgated's, else /)\n"
	"      --pin-root DIR     devgated's pin directory (default: the running devgated's,\n"
	"                         else " DG_DEFAULT_PIN_ROOT ")\n"
	"      --containers       also list each running container devgated finds through its\n"
	"                         runtimes, and the mechanism a grant would use there: v2 BPF\n"
	"                         gate, v2 gate + v1 devices PATH, v1 devices PATH (no cgroup\n"
	"                         v2), or cannot: REASON (nothing is granted)\n";

enum {
	OPT_HOST_ROOT = 256,
	OPT_PIN_ROOT,
	OPT_CONTAINERS
};

int cmd_doctor(struct cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "host-root", required_argument, NULL, OPT_HOST_ROOT },
		{ "pin-root", required_argument, NULL, OPT_PIN_ROOT },
		{ "containers", no_argument, NULL, OPT_CONTAINERS },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct doctor d = { .host_root = "/",
			    .pin_root = DG_DEFAULT_PIN_ROOT,
			    .socket = cli->socket,
			    .timeout_s = cli->timeout_s };
	auto_json json_object *report = NULL;
	bool host_given = false, pins_given = false;
	enum status worst;
	int o;

	while ((o = getopt_long(argc, argv, "jh", opts, NULL)) != -1) {
		switch (o) {
		case OPT_HOST_ROOT:
			d.host_root = optarg;
			host_given = true;
			break;
		case OPT_PIN_ROOT:
			d.pin_root = optarg;
			pins_given = true;
			break;
		case OPT_CONTAINERS:
			d.containers = true;
			break;
		case 'j':
			cli->json = true;
			break;
		case 'h':
			printf("%s%s", doctor_help, cmd_common_help);
			return 0;
		default:
			return cli_usage(cli, "doctor", "unknown option");
		}
	}
	if (optind < argc)
		return cli_usage(cli, "doctor", "unexpected argument '%s'", argv[optind]);
	ask_daemon(&d, !host_given, !pins_given);
	report = run_checks(&d, &worst);
	if (cli->json)
		print_json(report);
	else
		render_doctor(report);
	inventory_free(d.inv);
	free(d.cg_mount);
	dg_arena_free(&d.arena);
	if (worst != ST_FAIL)
		return 0;
	/* The report already said what failed. */
	dg_error_set(&cli->err, DG_E_CHECK, EIO, "at least one check failed");
	cli->reported = true;
	return -EIO;
}
