// SPDX-License-Identifier: Apache-2.0
/*
 * Keeps the inventory true while devgated runs (see rescan.h): reads the
 * kernel's uevents, decides which are about a GPU or its driver, re-reads
 * the host, keeps vanished GPUs listed, swaps the inventory and tells the
 * holders of what changed. It never changes a lease itself: leases whose
 * numbers moved are moved through the inventory_swapped hook (main.c wires
 * it to grant/refresh.c), and holders are told through lease_changed.
 */
#include <errno.h>
#include <linux/netlink.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gate/bpfgate.h"
#include "core/config.h"
#include "cleanup.h"
#include "log.h"
#include "nvml.h"
#include "lease/policy.h"
#include "rescan.h"
#include "util.h"

#define UEVENT_GROUP_KERNEL 1

int rescan_open(struct daemon *d)
{
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK, .nl_groups = UEVENT_GROUP_KERNEL };
	auto_close int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
				   NETLINK_KOBJECT_UEVENT);

	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -errno;
	d->uevent_fd = TAKE_FD(fd);
	return 0;
}

void rescan_close(struct daemon *d)
{
	d->uevent_fd = safe_close(d->uevent_fd);
}

static const char *uevent_get(const char *msg, size_t len, const char *key)
{
	size_t klen = strlen(key);

	for (size_t off = 0; off < len;) {
		const char *kv = msg + off;
		size_t n = strnlen(kv, len - off);

		if (n > klen && strncmp(kv, key, klen) == 0 && kv[klen] == '=' && off + n < len)
			return kv + klen + 1;
		off += n + 1;
	}
	return NULL;
}

bool rescan_uevent_relevant(const char *msg, size_t len)
{
	const char *subsystem = uevent_get(msg, len, "SUBSYSTEM");
	const char *v;

	if (!subsystem)
		return false;
	/* The nvidia, nvidia_uvm, nvidia_modeset... modules: a driver load or unload. */
	if (strcmp(subsystem, "module") == 0)
		return (v = uevent_get(msg, len, "DEVPATH")) &&
		       (startswith(v, "/module/nvidia") || strcmp(v, "/module/amdgpu") == 0 ||
			strcmp(v, "/module/i915") == 0 || strcmp(v, "/module/xe") == 0);
	/* A DRM node (AMD's and Intel's GPUs) came or went. */
	if (strcmp(subsystem, "drm") == 0)
		return true;
	if (strcmp(subsystem, "pci") != 0)
		return false;
	/* A display controller (class 03xxxx) or anything of NVIDIA's or its driver's. */
	if ((v = uevent_get(msg, len, "PCI_CLASS")) && strlen(v) == 5 && v[0] == '3')
		return true;
	if ((v = uevent_get(msg, len, "PCI_ID")) && strncasecmp(v, "10DE:", 5) == 0)
		return true;
	return (v = uevent_get(msg, len, "DRIVER")) && startswith(v, "nvidia");
}

void rescan_uevents(struct daemon *d)
{
	char buf[8192];
	bool relevant = false;

	for (;;) {
		struct sockaddr_nl from = { 0 };
		socklen_t flen = sizeof(from);
		ssize_t n = recvfrom(d->uevent_fd, buf, sizeof(buf) - 1, 0,
				     (struct sockaddr *)&from, &flen);

		if (n < 0) {
			if (errno == ENOBUFS) /* the kernel dropped some: look anyway */
				relevant = true;
			if (errno == EINTR || errno == ENOBUFS)
				continue;
			break;
		}
		/* Only the kernel's own messages (port 0); never a process's. */
		if (from.nl_pid != 0)
			continue;
		buf[n] = '\0';
		relevant |= rescan_uevent_relevant(buf, (size_t)n);
	}
	if (relevant) {
		struct dg_error err = { 0 };

		if (rescan_run(d, "uevent", NULL, NULL, &err) < 0)
			log_warning("cannot re-read the GPU inventory: %s", err.message);
	}
}

static const struct dg_gpu *find_live(const struct dg_inventory *inv, const char *uuid)
{
	for (size_t i = 0; i < inv->n_gpus; i++) {
		if (!inv->gpus[i].gone && strcasecmp(inv->gpus[i].uuid, uuid) == 0)
			return &inv->gpus[i];
	}
	return NULL;
}

/*
 * Returns ", nvidia-caps A -> B" for the log when MIG's major changed
 * between old and next, or "" when it did not.
 */
static const char *caps_change(const struct dg_inventory *old, const struct dg_inventory *next,
			       char *buf, size_t len)
{
	buf[0] = '\0';
	if (old->majors.has_caps || next->majors.has_caps)
		snprintf(buf, len, ", nvidia-caps %u -> %u", old->majors.caps, next->majors.caps);
	return buf;
}

static bool majors_equal(const struct dg_majors *a, const struct dg_majors *b)
{
	return a->has_nvidia == b->has_nvidia && a->nvidia == b->nvidia &&
	       a->has_uvm == b->has_uvm && a->uvm == b->uvm && a->has_caps == b->has_caps &&
	       a->caps == b->caps;
}

/*
 * A driver reload with new majors is adopted: the leases move to them
 * (refresh.c). With the driver gone there is nothing to move to: the old
 * majors stay, and every GPU is unusable until it is back.
 */
static void keep_majors(const struct dg_inventory *old, struct dg_inventory *next)
{
	char caps[48];

	if (majors_equal(&old->majors, &next->majors))
		return;
	if (next->majors.has_nvidia || !old->majors.has_nvidia) {
		log_notice("the driver's majors changed (nvidia %u -> %u, nvidia-uvm %u -> %u%s); "
			   "leases move to them",
			   old->majors.nvidia, next->majors.nvidia, old->majors.uvm,
			   next->majors.uvm, caps_change(old, next, caps, sizeof(caps)));
		return;
	}
	log_warning("the NVIDIA driver is not loaded (/proc/devices)");
	next->majors = old->majors;
	memcpy(next->ctl, old->ctl, sizeof(next->ctl));
	memcpy(next->ctl_vendor, old->ctl_vendor, sizeof(next->ctl_vendor));
	next->n_ctl = old->n_ctl;
	snprintf(next->ctl_problem, sizeof(next->ctl_problem),
		 "the NVIDIA driver is not loaded (/proc/devices)");
	for (size_t i = 0; i < next->n_gpus; i++) {
		if (!next->gpus[i].problem[0])
			snprintf(next->gpus[i].problem, sizeof(next->gpus[i].problem), "%s",
				 next->ctl_problem);
	}
}

/*
 * Adds to next, marked gone, every GPU of old that next lacks: leases name
 * GPUs by index and UUID, so a vanished one stays listed, unusable.
 * Returns 0 or -ENOMEM.
 */
static int keep_vanished(const struct dg_inventory *old, struct dg_inventory *next)
{
	char when[64];

	format_time_utc(now_wall_s(), when, sizeof(when));
	if (!next->gpus) {
		next->gpus = calloc(DG_MAX_GPUS, sizeof(*next->gpus));
		if (!next->gpus)
			return -ENOMEM;
	}
	for (size_t i = 0; i < old->n_gpus; i++) {
		const struct dg_gpu *g = &old->gpus[i];
		struct dg_gpu *kept;

		if (!g->uuid[0] || find_live(next, g->uuid) || next->n_gpus == DG_MAX_GPUS)
			continue;
		kept = &next->gpus[next->n_gpus++];
		*kept = *g;
		if (!g->gone)
			snprintf(kept->problem, sizeof(kept->problem),
				 "vanished: no longer listed by the driver (rescan at %s)", when);
		kept->gone = true;
	}
	return 0;
}

static bool same_state(const struct dg_gpu *a, const struct dg_gpu *b)
{
	return a->minor == b->minor && a->excluded == b->excluded &&
	       strcmp(a->problem, b->problem) == 0 && strcmp(a->pci, b->pci) == 0;
}

struct diff {
	const char *appeared[DG_MAX_GPUS], *vanished[DG_MAX_GPUS], *changed[DG_MAX_GPUS];
	size_t n_appeared, n_vanished, n_changed;
};

static void diff(const struct dg_inventory *old, const struct dg_inventory *next, struct diff *out)
{
	for (size_t i = 0; i < next->n_gpus; i++) {
		const struct dg_gpu *g = &next->gpus[i];
		const struct dg_gpu *was = find_live(old, g->uuid);

		if (g->gone && was)
			out->vanished[out->n_vanished++] = g->uuid;
		else if (!g->gone && !was)
			out->appeared[out->n_appeared++] = g->uuid;
		else if (!g->gone && !same_state(was, g))
			out->changed[out->n_changed++] = g->uuid;
	}
}

/*
 * Tells the holders of each GPU that vanished or came back (type) through
 * the lease_changed hook, which feeds the watch stream.
 */
static void tell_holders(struct daemon *d, const struct dg_inventory *old, const char *type)
{
	for (size_t i = 0; i < d->leases.n; i++) {
		const struct lease *l = d->leases.v[i];
		const char *uuids[DG_MAX_GPUS];
		size_t n = 0;

		for (size_t g = 0; g < l->n_gpus; g++) {
			const char *u = l->gpus[g].uuid;
			bool was = find_live(old, u), is = find_live(d->inv, u);

			if (strcmp(type, "vanished") == 0 ? was && !is : !was && is)
				uuids[n++] = u;
		}
		if (n && d->hooks.lease_changed)
			d->hooks.lease_changed(d, type, l, uuids, n);
	}
}

static const char **arena_strs(struct dg_arena *a, const char *const *v, size_t n)
{
	const char **out = dg_arena_alloc(a, (n + 1) * sizeof(*out));

	for (size_t i = 0; out && i < n; i++) {
		out[i] = dg_arena_strdup(a, v[i]);
		if (!out[i])
			return NULL;
	}
	return out;
}

static int fill_reply(const struct diff *x, size_t n_gpus, struct dg_rescan_reply *out,
		      struct dg_arena *a)
{
	*out = (struct dg_rescan_reply){
		.gpus = (int64_t)n_gpus,
		.appeared = arena_strs(a, x->appeared, x->n_appeared),
		.n_appeared = x->n_appeared,
		.vanished = arena_strs(a, x->vanished, x->n_vanished),
		.n_vanished = x->n_vanished,
		.changed = arena_strs(a, x->changed, x->n_changed),
		.n_changed = x->n_changed,
	};
	return out->appeared && out->vanished && out->changed ? 0 : -ENOMEM;
}

int rescan_run(struct daemon *d, const char *why, struct dg_rescan_reply *out, struct dg_arena *a,
	       struct dg_error *err)
{
	struct dg_inventory *next = NULL, *old = d->inv;
	struct diff x = { 0 };
	int r = inventory_discover(d->cfg->host_root, &next, err);

	if (r < 0)
		return r;
	nvml_fill(next, old);
	keep_majors(old, next);
	if (keep_vanished(old, next) < 0) {
		inventory_free(next);
		return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	}
	policy_apply(&d->cfg->policy, next);
	inventory_order(next);
	diff(old, next, &x);
	/* The reply copies the UUIDs: x points into next, which a later rescan frees. */
	r = out ? fill_reply(&x, next->n_gpus, out, a) : 0;
	d->inv = next;
	/* New DRM GPUs and majors are guarded from now on; vanished ones stay (kept in next),
	 * and an old driver's majors while leases move off them. */
	if (d->bg && bpfgate_guard_sync_both(d->bg, next, old) < 0)
		log_warning("cannot update dg_guarded_v1: new GPUs are not guarded yet");
	if (d->bg && d->hooks.inventory_swapped && d->hooks.inventory_swapped(d))
		log_warning(
			"some leases keep the old driver's nodes; the next rescan or start tries "
			"again");
	if (d->bg && bpfgate_guard_sync(d->bg, next) < 0)
		log_warning("cannot update dg_guarded_v1: the old driver's majors stay guarded");
	/* A GPU that appeared or works again may serve a waiting grant. */
	if ((x.n_appeared || x.n_changed) && d->hooks.capacity_changed)
		d->hooks.capacity_changed(d);
	/* A driver load sends uevents by the dozen; only changes are news then. */
	(void)log_full_errno(x.n_appeared + x.n_vanished + x.n_changed || strcmp(why, "uevent") != 0
				     ? LOG_INFO
				     : LOG_DEBUG,
			     0,
			     "inventory re-read (%s): %zu GPU(s), %zu appeared, %zu vanished, "
			     "%zu changed",
			     why, next->n_gpus, x.n_appeared, x.n_vanished, x.n_changed);
	tell_holders(d, old, "vanished");
	tell_holders(d, old, "restored");
	inventory_free(old);
	return r < 0 ? dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory") : 0;
}
