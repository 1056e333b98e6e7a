// SPDX-License-Identifier: Apache-2.0
/*
 * The Prometheus page (text exposition format 0.0.4) of devgated, rendered
 * when someone asks for it: devgatectl metrics, or GET /metrics. It reads
 * devgated's counters (a snapshot from metrics/metrics.c), the lease table,
 * the inventory, the BPF counters map and the denial events, and changes
 * none of them. It keeps no state between two renders; it must not count
 * anything itself (counting is metrics/metrics.c's job).
 *
 * From the BPF counters map (per container and device; only cgroups with a
 * lease, so a released container's series disappear):
 *   devgate_device_accesses_granted_total  accesses allowed by a devgate grant
 *   devgate_device_accesses_passed_total   GPU-class accesses handed to the runtime's program
 *   devgate_device_accesses_allowed_total  GPU-class accesses allowed in the end
 *   devgate_device_accesses_denied_total   GPU-class accesses denied in the end
 *     labels: container, cgroup, type ("c" or "b"), device ("195:1", or
 *             "other" for all devices that are no GPU or control node),
 *             node ("/dev/nvidia1", "" when not a GPU or control node),
 *             gpu (UUID, "" when not a GPU), access ("r", "w", "rw", "m", ...)
 *   devgate_bpf_counters_map_entries       keys in the BPF counters map (all cgroups)
 *   devgate_bpf_counters_map_capacity      its size; a full map stops counting new keys
 * From the lease records (per lease and GPU it holds or held; gone with the lease):
 *   devgate_gpu_seconds_total{container,cgroup,gpu}  GPU time of the lease, in
 *                                          seconds with milliseconds; kept in the
 *                                          record, so it continues across restarts
 *   devgate_mig_instance_held{gpu,gi,profile}  1 while a lease holds the MIG instance
 * From the daemon:
 *   devgate_build_info{version}            always 1
 *   devgate_leases                         leases held now
 *   devgate_gpus{state}                    GPUs free, held, shared, split, unusable, excluded
 *   devgate_grants_total                   grant requests served
 *   devgate_revokes_total                  revoke requests served
 *   devgate_releases_total                 leases released because the container ended
 *   devgate_lease_expirations_total        leases revoked because their ttl ran out
 *   devgate_lease_refreshes_total          leases moved to a reloaded driver's numbers
 *   devgate_queue_length                   grants waiting for GPUs now (grant --wait)
 *   devgate_queue_wait_seconds             histogram of how long served waiters waited
 *   devgate_queue_served_total             waiting grants served
 *   devgate_queue_timeouts_total           waiting grants whose --wait ran out
 *   devgate_queue_cancelled_total          waiting grants whose client left, whose
 *                                          container ended, or that failed when tried
 *   devgate_request_failures_total{op,reason}  failed requests by error code name
 *   devgate_grant_duration_seconds         histogram of grant request latency
 *   devgate_revoke_duration_seconds        histogram of revoke request latency
 *   devgate_reconcile_corrections_total    fixes by start-up reconcile and re-checks
 *   devgate_hook_calls_total{stage}        requests from the OCI hook, by stage
 *   devgate_state_records_broken_total     lease records moved aside as damaged at start
 *   devgate_denial_events_total            denial events read from the BPF ring buffer
 *   devgate_denial_events_dropped_total    denial events lost to a full ring buffer
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "gate/bpfgate.h"
#include "array.h"
#include "cleanup.h"
#include "events.h"
#include "metrics/metrics.h"
#include "metrics/promtext.h"
#include "metrics_page.h"
#include "util.h"
#include "version.h"
#include "view.h"

/* The name and help text of each plain counter of metrics/metrics.h. */
static const struct {
	const char *name;
	const char *help;
} counter_info[METRIC_COUNTER_MAX] = {
	[METRIC_GRANTS] = { "devgate_grants_total", "Grant requests served." },
	[METRIC_REVOKES] = { "devgate_revokes_total", "Revoke requests served." },
	[METRIC_RELEASES] = { "devgate_releases_total",
			      "Leases released because their container ended or its cgroup went "
			      "away." },
	[METRIC_RECORDS_BROKEN] = { "devgate_state_records_broken_total",
				    "Lease records that did not parse at start and were moved to "
				    "leases/broken/." },
	[METRIC_EXPIRATIONS] = { "devgate_lease_expirations_total",
				 "Leases revoked because their time to live (grant --ttl) ran out." },
	[METRIC_REFRESHES] = { "devgate_lease_refreshes_total",
			       "Leases whose grants and nodes moved to the numbers of a reloaded "
			       "driver (rescan)." },
	[METRIC_QUEUE_TIMEOUTS] = { "devgate_queue_timeouts_total",
				    "Waiting grants (grant --wait) whose time ran out." },
	[METRIC_QUEUE_CANCELLED] = { "devgate_queue_cancelled_total",
				     "Waiting grants whose client left or container ended, or "
				     "that failed when tried." },
	[METRIC_RECONCILE_FIXES] = { "devgate_reconcile_corrections_total",
				     "Corrections made to the kernel by start-up reconciliation "
				     "and the periodic re-check of gates." },
};

/* ---- device counters from BPF ---- */

/* One series of the device families: a leased cgroup's counts for one key. */
struct dev_series {
	const struct lease *lease;
	struct dg_count_key key;
	struct dg_count_val val;
};

/* Every series of the page, read from the counters map at one scrape. */
struct dev_counters {
	struct dev_series *v;
	size_t n;
	size_t cap;
	uint64_t entries; /* every key in the map, leased or not */
};

/* Adds the counts of v to those of to. */
static void count_add(struct dg_count_val *to, const struct dg_count_val *v)
{
	to->granted += v->granted;
	to->passed += v->passed;
	to->allowed += v->allowed;
	to->denied += v->denied;
}

/* Appends the series of key, summing its per-CPU values; -ENOMEM. */
static int dev_add(struct dev_counters *dc, const struct lease *l, const struct dg_count_key *key,
		   const struct dg_count_val *per_cpu, int ncpus)
{
	struct dev_series *s;

	if (ARRAY_GROW(dc->v, dc->n, dc->cap) < 0)
		return -ENOMEM;
	s = &dc->v[dc->n++];
	*s = (struct dev_series){ .lease = l, .key = *key };
	for (int cpu = 0; cpu < ncpus; cpu++)
		count_add(&s->val, &per_cpu[cpu]);
	return 0;
}

/* qsort order of two series: by cgroup, type, major, minor, access. */
static int key_cmp(const void *a, const void *b)
{
	const struct dg_count_key *x = &((const struct dev_series *)a)->key;
	const struct dg_count_key *y = &((const struct dev_series *)b)->key;

	if (x->cgroup_id != y->cgroup_id)
		return x->cgroup_id < y->cgroup_id ? -1 : 1;
	if (x->type != y->type)
		return x->type < y->type ? -1 : 1;
	if (x->major != y->major)
		return x->major < y->major ? -1 : 1;
	if (x->minor != y->minor)
		return x->minor < y->minor ? -1 : 1;
	return x->access < y->access ? -1 : x->access > y->access;
}

/*
 * Sorts the series and leaves one per key. With sum false a repeated key is
 * dropped: a walk of the map that races inserts may see a key twice. With
 * sum true repeated keys are added up: devices folded into "other".
 */
static void dev_sort(struct dev_counters *dc, bool sum)
{
	size_t out = 0;

	if (dc->n == 0)
		return;
	qsort(dc->v, dc->n, sizeof(*dc->v), key_cmp);
	for (size_t i = 1; i < dc->n; i++) {
		struct dev_series *o = &dc->v[out];

		if (key_cmp(&dc->v[i], o) != 0) {
			dc->v[++out] = dc->v[i];
		} else if (sum) {
			count_add(&o->val, &dc->v[i].val);
		}
	}
	dc->n = out + 1;
}

/*
 * The major and minor of the series that sums a container's unknown devices:
 * the key the gate and tally already fold them into (devgate.h).
 */
#define DEV_OTHER DG_DEV_OTHER

/*
 * Whether the key is a GPU-class device (one the gate guards), which the
 * tally program counts. A folded "other" series is one: only GPU-class
 * devices are folded.
 */
static bool gpu_class(const struct dg_inventory *inv, const struct dg_count_key *k)
{
	return k->type == DG_DEV_CHAR &&
	       (k->major == DEV_OTHER || inventory_guards(inv, k->major, k->minor));
}

/*
 * A container may try any minor of a GPU major (mknod then open), and each
 * would be a series of its own. Devices that are no node devgate knows are
 * summed into one "other" series per container, access and type, which keeps
 * the number of series bounded by the host's GPUs, not by the container.
 */
static void dev_fold(const struct daemon *d, struct dev_counters *dc)
{
	bool folded = false;

	for (size_t i = 0; i < dc->n; i++) {
		struct dg_count_key *k = &dc->v[i].key;
		const struct dg_gpu *gpu;
		char node[64];

		if (!gpu_class(d->inv, k) ||
		    inventory_find_node(d->inv, k->major, k->minor, node, sizeof(node), &gpu))
			continue;
		k->major = k->minor = DEV_OTHER;
		folded = true;
	}
	if (folded)
		dev_sort(dc, true);
}

/*
 * Reads the whole counters map into dc: every key is counted in
 * dc->entries, but only keys of a leased cgroup become series. 0, or -ENOMEM.
 */
static int dev_collect(struct daemon *d, int ncpus, struct dev_counters *dc)
{
	int fd = bpfgate_counters_fd(d->bg);
	auto_free struct dg_count_val *per_cpu = calloc((size_t)ncpus, sizeof(*per_cpu));
	struct dg_count_key key, next;
	void *prev = NULL;

	if (!per_cpu)
		return -ENOMEM;
	while (bpf_map_get_next_key(fd, prev, &next) == 0) {
		const struct lease *l = lease_table_find(&d->leases, next.cgroup_id);
		int r;

		key = next;
		prev = &key;
		dc->entries++;
		if (!l || bpf_map_lookup_elem(fd, &key, per_cpu) < 0)
			continue;
		r = dev_add(dc, l, &key, per_cpu, ncpus);
		if (r < 0)
			return r;
	}
	dev_sort(dc, false);
	dev_fold(d, dc);
	return 0;
}

/* The label values of one series, written out as text. */
struct dev_text {
	char device[24];
	char node[64];
	char access[8];
	const char *gpu;
};

enum {
	DEV_LABELS = 8
};

/*
 * Fills the labels of series s (their strings live in t and the lease) and
 * returns how many: a lease named by a runtime adds runtime="docker" at the
 * end; a label's has none (to Prometheus, the same as an empty value).
 */
static size_t dev_labels(const struct daemon *d, const struct dev_series *s, struct dev_text *t,
			 struct promtext_label *labels)
{
	const struct dg_gpu *gpu = NULL;

	if (s->key.major == DEV_OTHER)
		snprintf(t->device, sizeof(t->device), "other");
	else
		snprintf(t->device, sizeof(t->device), "%u:%u", s->key.major, s->key.minor);
	if (s->key.type != DG_DEV_CHAR || !inventory_find_node(d->inv, s->key.major, s->key.minor,
							       t->node, sizeof(t->node), &gpu))
		t->node[0] = '\0';
	t->gpu = gpu ? gpu->uuid : "";
	view_access_str(s->key.access, t->access, sizeof(t->access));
	labels[0] = (struct promtext_label){ "container", s->lease->container };
	labels[1] = (struct promtext_label){ "cgroup", s->lease->cgroup };
	labels[2] = (struct promtext_label){ "type", s->key.type == DG_DEV_BLOCK ? "b" : "c" };
	labels[3] = (struct promtext_label){ "device", t->device };
	labels[4] = (struct promtext_label){ "node", t->node };
	labels[5] = (struct promtext_label){ "gpu", t->gpu };
	labels[6] = (struct promtext_label){ "access", t->access };
	labels[7] = (struct promtext_label){ "runtime", s->lease->runtime };
	return s->lease->runtime ? DEV_LABELS : DEV_LABELS - 1;
}

/* The four device families, each one field of struct dg_count_val. */
static const struct {
	const char *name;
	const char *help;
	size_t offset; /* into struct dg_count_val */
	bool gpu_only; /* counted by the tally, which sees GPU-class devices only */
} dev_families[] = {
	{ "devgate_device_accesses_granted_total",
	  "Device accesses of a container allowed by a devgate grant.",
	  offsetof(struct dg_count_val, granted), false },
	{ "devgate_device_accesses_passed_total",
	  "GPU-class device accesses of a container handed to the runtime's own device program.",
	  offsetof(struct dg_count_val, passed), true },
	{ "devgate_device_accesses_allowed_total",
	  "GPU-class device accesses of a container that all its device programs allowed.",
	  offsetof(struct dg_count_val, allowed), true },
	{ "devgate_device_accesses_denied_total",
	  "GPU-class device accesses of a container that a device program denied.",
	  offsetof(struct dg_count_val, denied), true },
};

/* The device families and the size of the counters map. */
static void write_devices(FILE *f, const struct daemon *d, const struct dev_counters *dc)
{
	for (size_t k = 0; k < ARRAY_SIZE(dev_families); k++) {
		char help[256];

		/* cgroup v1 alone: the kernel's devices list counts nothing, so no sample. */
		snprintf(help, sizeof(help), "%s%s", dev_families[k].help,
			 d->cg.v1 ? " Not available on a host with cgroup v1 alone (no device "
				    "program sees its accesses): no samples."
				  : "");
		promtext_family(f, dev_families[k].name, "counter", help);
		for (size_t i = 0; i < dc->n; i++) {
			const struct dev_series *s = &dc->v[i];
			struct promtext_label labels[DEV_LABELS];
			struct dev_text t = { 0 };
			uint64_t v;
			size_t n;

			if (dev_families[k].gpu_only && !gpu_class(d->inv, &s->key))
				continue;
			n = dev_labels(d, s, &t, labels);
			memcpy(&v, (const char *)&s->val + dev_families[k].offset, sizeof(v));
			promtext_sample(f, dev_families[k].name, labels, n, v);
		}
	}
	promtext_family(f, "devgate_bpf_counters_map_entries", "gauge",
			"Keys in the BPF device counters map, of every cgroup.");
	promtext_sample(f, "devgate_bpf_counters_map_entries", NULL, 0, dc->entries);
	promtext_family(f, "devgate_bpf_counters_map_capacity", "gauge",
			"Size of the BPF device counters map; once full, new keys go uncounted.");
	promtext_sample(f, "devgate_bpf_counters_map_capacity", NULL, 0, DG_MAX_COUNTERS);
}

/* ---- the daemon's own metrics ---- */

/* Build info, how many leases and waiters there are, and the GPUs by state. */
static void write_state(FILE *f, struct daemon *d, const struct metrics_snapshot *m)
{
	static const char *const states[] = { "free",  "held",	   "shared",
					      "split", "unusable", "excluded" };
	struct promtext_label label = { "version", DEVGATE_VERSION };

	promtext_family(f, "devgate_build_info", "gauge", "devgated's version; always 1.");
	promtext_sample(f, "devgate_build_info", &label, 1, 1);
	promtext_family(f, "devgate_leases", "gauge", "Leases held now.");
	promtext_sample(f, "devgate_leases", NULL, 0, d->leases.n);
	promtext_family(f, "devgate_queue_length", "gauge",
			"Grants waiting for GPUs now (grant --wait).");
	promtext_sample(f, "devgate_queue_length", NULL, 0, m->queue_length);
	promtext_family(f, "devgate_gpus", "gauge", "GPUs on this host by state.");
	for (size_t s = 0; s < ARRAY_SIZE(states); s++) {
		uint64_t n = 0;

		for (size_t i = 0; i < d->inv->n_gpus; i++)
			n += strcmp(view_gpu_state(&d->leases, &d->inv->gpus[i]), states[s]) == 0;
		label = (struct promtext_label){ "state", states[s] };
		promtext_sample(f, "devgate_gpus", &label, 1, n);
	}
}

/* One devgate_gpu_seconds_total sample: the GPU time of lease l on GPU uuid. */
static void gpu_time_sample(FILE *f, const struct lease *l, const char *uuid, int64_t now_ms)
{
	struct promtext_label labels[4] = {
		{ "container", l->container ? l->container : "" },
		{ "cgroup", l->cgroup },
		{ "gpu", uuid },
		{ "runtime", l->runtime },
	};

	promtext_sample_milli(f, "devgate_gpu_seconds_total", labels, l->runtime ? 4 : 3,
			      (uint64_t)lease_gpu_ms(l, uuid, now_ms));
}

/*
 * One sample per MIG instance of the host's GPUs: 1 while a lease holds it,
 * else 0. A host without MIG instances gets no family at all.
 */
static void write_instances(FILE *f, struct daemon *d)
{
	static const char name[] = "devgate_mig_instance_held";
	bool any = false;

	for (size_t i = 0; i < d->inv->n_gpus; i++)
		any |= d->inv->gpus[i].n_gi > 0;
	if (!any)
		return; /* no family on a host without MIG instances */
	promtext_family(f, name, "gauge",
			"MIG instances of the host's GPUs (GPU UUID, GPU instance id, and "
			"NVML's profile name where known): 1 while a container holds one.");
	for (size_t i = 0; i < d->inv->n_gpus; i++) {
		const struct dg_gpu *g = &d->inv->gpus[i];

		for (size_t j = 0; j < g->n_gi; j++) {
			const struct lease_use *u =
				lease_table_use_gi(&d->leases, g->uuid, g->gi[j].id);
			char gi[16];
			struct promtext_label labels[3] = { { "gpu", g->uuid },
							    { "gi", gi },
							    { "profile", g->gi[j].profile } };

			snprintf(gi, sizeof(gi), "%u", g->gi[j].id);
			/* The profile where NVML told it. */
			promtext_sample(f, name, labels, g->gi[j].profile[0] ? 3 : 2,
					u && u->n_exclusive ? 1 : 0);
		}
	}
}

/*
 * The GPU time of each lease, per GPU it holds or held, computed from the
 * records at the time of the scrape: no timer, no polling.
 */
static void write_gpu_time(FILE *f, struct daemon *d)
{
	int64_t now_ms = now_wall_ms();

	promtext_family(f, "devgate_gpu_seconds_total", "counter",
			"GPU time of a lease, per GPU it holds or held, in seconds; kept across "
			"restarts of devgated while the lease lives.");
	for (size_t i = 0; i < d->leases.n; i++) {
		const struct lease *l = d->leases.v[i];

		for (size_t g = 0; g < l->n_gpus; g++)
			gpu_time_sample(f, l, l->gpus[g].uuid, now_ms);
		for (size_t g = 0; g < l->n_spent; g++)
			gpu_time_sample(f, l, l->spent[g].uuid, now_ms);
	}
}

/* Failed requests by operation and error code; codes never seen are left out. */
static void write_failures(FILE *f, const struct metrics_snapshot *m)
{
	static const char name[] = "devgate_request_failures_total";

	promtext_family(f, name, "counter",
			"Requests that failed, by operation and error code name.");
	for (int op = 0; op <= DG_OP_MAX; op++) {
		for (int code = 0; code < DG_CODE_MAX; code++) {
			struct promtext_label labels[2] = {
				{ "op", op < DG_OP_MAX ? dg_op_info(op)->name : "unknown" },
				{ "reason", dg_code_info(code)->name },
			};

			if (m->failures[op][code])
				promtext_sample(f, name, labels, 2, m->failures[op][code]);
		}
	}
}

/* devgated's own counters (the snapshot m), and the denial events read and lost. */
static void write_daemon(FILE *f, const struct metrics_snapshot *m, const struct events *ev,
			 uint64_t dropped)
{
	for (int c = 0; c < METRIC_COUNTER_MAX; c++) {
		promtext_family(f, counter_info[c].name, "counter", counter_info[c].help);
		promtext_sample(f, counter_info[c].name, NULL, 0, m->counters[c]);
	}
	write_failures(f, m);
	promtext_histogram_write(f, "devgate_grant_duration_seconds",
				 "Time devgated took to serve a grant request.", &m->grant_time);
	promtext_histogram_write(f, "devgate_revoke_duration_seconds",
				 "Time devgated took to serve a revoke request.", &m->revoke_time);
	promtext_histogram_write(f, "devgate_queue_wait_seconds",
				 "How long served waiting grants (grant --wait) waited.",
				 &m->queue_wait);
	promtext_family(f, "devgate_queue_served_total", "counter",
			"Waiting grants (grant --wait) served.");
	promtext_sample(f, "devgate_queue_served_total", NULL, 0, m->queue_wait.count);
	promtext_family(f, "devgate_hook_calls_total", "counter",
			"Grant and revoke requests from the OCI hook, by hook stage.");
	for (size_t i = 0; i < METRICS_HOOK_STAGES; i++) {
		struct promtext_label label = { "stage", metrics_hook_stage(i) };

		promtext_sample(f, "devgate_hook_calls_total", &label, 1, m->hook_calls[i]);
	}
	promtext_family(f, "devgate_denial_events_total", "counter",
			"Denial events read from the BPF ring buffer (rate-limited in BPF to "
			"one per container and device per second).");
	promtext_sample(f, "devgate_denial_events_total", NULL, 0, ev ? events_received(ev) : 0);
	promtext_family(f, "devgate_denial_events_dropped_total", "counter",
			"Denial events the BPF ring buffer had no room for, because devgated "
			"read too slowly; counters are not affected.");
	promtext_sample(f, "devgate_denial_events_dropped_total", NULL, 0, dropped);
}

/*
 * Reads the BPF side: the counters map into dc and how many denial events
 * the ring buffer had no room for. 0, or -errno.
 */
static int read_bpf(struct daemon *d, struct dev_counters *dc, uint64_t *dropped)
{
	/* Per-CPU maps hold one value per possible CPU; libbpf reads it once. */
	int ncpus = libbpf_num_possible_cpus();
	int r;

	if (ncpus <= 0)
		return ncpus < 0 ? ncpus : -EINVAL;
	r = dev_collect(d, ncpus, dc);
	if (r == 0)
		r = bpfgate_events_dropped(d->bg, ncpus, dropped);
	return r;
}

int metrics_render(struct daemon *d, char **ret, size_t *ret_len)
{
	struct metrics_snapshot snap;
	struct dev_counters dc = { 0 };
	uint64_t dropped = 0;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;
	int r = 0;

	if (!d->metrics)
		return -EINVAL;
	metrics_snapshot(d->metrics, &snap);
	if (d->bg)
		r = read_bpf(d, &dc, &dropped);
	f = r == 0 ? open_memstream(&buf, &len) : NULL;
	if (r == 0 && !f)
		r = -errno;
	if (f) {
		write_state(f, d, &snap);
		write_gpu_time(f, d);
		write_instances(f, d);
		write_daemon(f, &snap, d->events, dropped);
		if (d->bg)
			write_devices(f, d, &dc);
		if (ferror(f))
			r = -ENOMEM;
		if (fclose(f) != 0 && r == 0)
			r = -errno;
	}
	free(dc.v);
	if (r < 0) {
		free(buf);
		return r;
	}
	*ret = buf;
	*ret_len = len;
	return 0;
}
