// SPDX-License-Identifier: Apache-2.0
/*
 * Prometheus metrics of devgated (text exposition format 0.0.4).
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
 * From the daemon:
 *   devgate_build_info{version}            always 1
 *   devgate_leases                         leases held now
 *   devgate_gpus{state}                    GPUs free, held, shared, unusable, excluded
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
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "array.h"
#include "cleanup.h"
#include "view/events.h"
#include "log.h"
#include "metrics.h"
#include "promtext.h"
#include "util.h"
#include "version.h"
#include "view/view.h"

/* OCI hook stages; anything else a hook sends is counted as "other". */
static const char *const hook_stages[] = {
	"prestart",  "createRuntime", "createContainer", "startContainer",
	"poststart", "poststop",      "other",
};

/* 0.5 ms to 1 s: a grant forks a helper and touches BPF and the disk. */
static const double duration_bounds[] = { 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
					  0.05,	  0.1,	 0.25,	 0.5,	1 };

/* 10 ms to an hour: a waiter is served the moment a lease ends, or much later. */
static const double wait_bounds[] = { 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600 };

struct metrics {
	uint64_t counters[METRIC_COUNTER_MAX];
	uint64_t failures[DG_OP_MAX + 1][DG_CODE_MAX]; /* [DG_OP_MAX]: unparsed requests */
	uint64_t hook_calls[ARRAY_SIZE(hook_stages)];
	struct promtext_histogram grant_time;
	struct promtext_histogram revoke_time;
	struct promtext_histogram queue_wait; /* its count: devgate_queue_served_total */
	uint64_t queue_length;
	int ncpus;
};

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

int metrics_new(struct metrics **ret)
{
	struct metrics *m = calloc(1, sizeof(*m));

	if (!m)
		return -ENOMEM;
	m->ncpus = libbpf_num_possible_cpus();
	if (m->ncpus <= 0) {
		int r = m->ncpus < 0 ? m->ncpus : -EINVAL;

		free(m);
		return r;
	}
	promtext_histogram_init(&m->grant_time, duration_bounds, ARRAY_SIZE(duration_bounds));
	promtext_histogram_init(&m->revoke_time, duration_bounds, ARRAY_SIZE(duration_bounds));
	promtext_histogram_init(&m->queue_wait, wait_bounds, ARRAY_SIZE(wait_bounds));
	*ret = m;
	return 0;
}

void metrics_free(struct metrics *m)
{
	if (!m)
		return;
	free(m);
}

void metrics_inc(struct metrics *m, enum metrics_counter c, uint64_t n)
{
	if (m && c < METRIC_COUNTER_MAX)
		m->counters[c] += n;
}

void metrics_request_failed(struct metrics *m, enum dg_op op, enum dg_code code)
{
	if (!m || (int)op < 0 || op > DG_OP_MAX || (int)code < 0 || code >= DG_CODE_MAX)
		return;
	m->failures[op][code]++;
}

void metrics_queue_served(struct metrics *m, uint64_t ns)
{
	if (m)
		promtext_histogram_observe(&m->queue_wait, (double)ns / 1e9);
}

void metrics_queue_length(struct metrics *m, size_t n)
{
	if (m)
		m->queue_length = n;
}

void metrics_hook_call(struct metrics *m, const char *source)
{
	size_t i;

	if (!m || !source || !startswith(source, "hook/"))
		return;
	/* Known stages only: a client must not grow the label set at will. */
	for (i = 0; i + 1 < ARRAY_SIZE(hook_stages); i++) {
		if (strcmp(source + 5, hook_stages[i]) == 0)
			break;
	}
	m->hook_calls[i]++;
}

void metrics_observe(struct metrics *m, enum dg_op op, uint64_t ns)
{
	if (!m)
		return;
	if (op == DG_OP_GRANT)
		promtext_histogram_observe(&m->grant_time, (double)ns / 1e9);
	else if (op == DG_OP_REVOKE)
		promtext_histogram_observe(&m->revoke_time, (double)ns / 1e9);
}

/* ---- device counters from BPF ---- */

struct dev_series {
	const struct lease *lease;
	struct dg_count_key key;
	struct dg_count_val val;
};

struct dev_counters {
	struct dev_series *v;
	size_t n;
	size_t cap;
	uint64_t entries; /* every key in the map, leased or not */
};

static void count_add(struct dg_count_val *to, const struct dg_count_val *v)
{
	to->granted += v->granted;
	to->passed += v->passed;
	to->allowed += v->allowed;
	to->denied += v->denied;
}

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
 * Sorts the series; equal keys are dropped (sum false: a walk racing inserts
 * may repeat a key) or added up (sum true: devices folded into "other").
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

/* The major and minor of the series that sums a container's unknown devices. */
#define DEV_OTHER UINT32_MAX

/* Folded "other" series are GPU-class: only GPU-class devices are folded. */
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

struct dev_text {
	char device[24];
	char node[64];
	char access[8];
	const char *gpu;
};

enum {
	DEV_LABELS = 7
};

static void dev_labels(const struct daemon *d, const struct dev_series *s, struct dev_text *t,
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
}

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

static void write_devices(FILE *f, const struct daemon *d, const struct dev_counters *dc)
{
	for (size_t k = 0; k < ARRAY_SIZE(dev_families); k++) {
		promtext_family(f, dev_families[k].name, "counter", dev_families[k].help);
		for (size_t i = 0; i < dc->n; i++) {
			const struct dev_series *s = &dc->v[i];
			struct promtext_label labels[DEV_LABELS];
			struct dev_text t = { 0 };
			uint64_t v;

			if (dev_families[k].gpu_only && !gpu_class(d->inv, &s->key))
				continue;
			dev_labels(d, s, &t, labels);
			memcpy(&v, (const char *)&s->val + dev_families[k].offset, sizeof(v));
			promtext_sample(f, dev_families[k].name, labels, DEV_LABELS, v);
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

static void write_state(FILE *f, struct daemon *d)
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
	promtext_sample(f, "devgate_queue_length", NULL, 0, d->metrics->queue_length);
	promtext_family(f, "devgate_gpus", "gauge", "GPUs on this host by state.");
	for (size_t s = 0; s < ARRAY_SIZE(states); s++) {
		uint64_t n = 0;

		for (size_t i = 0; i < d->inv->n_gpus; i++)
			n += strcmp(view_gpu_state(d, &d->inv->gpus[i]), states[s]) == 0;
		label = (struct promtext_label){ "state", states[s] };
		promtext_sample(f, "devgate_gpus", &label, 1, n);
	}
}

static void gpu_time_sample(FILE *f, const struct lease *l, const char *uuid, int64_t now_ms)
{
	struct promtext_label labels[3] = {
		{ "container", l->container ? l->container : "" },
		{ "cgroup", l->cgroup },
		{ "gpu", uuid },
	};

	promtext_sample_milli(f, "devgate_gpu_seconds_total", labels, 3,
			      (uint64_t)lease_gpu_ms(l, uuid, now_ms));
}

/* Each MIG instance: 1 while a lease holds it. */
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

/* From the records, at the time of the scrape: no timer, no polling. */
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

static void write_failures(FILE *f, const struct metrics *m)
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

static void write_daemon(FILE *f, const struct metrics *m, const struct events *ev,
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
	for (size_t i = 0; i < ARRAY_SIZE(hook_stages); i++) {
		struct promtext_label label = { "stage", hook_stages[i] };

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

int metrics_render(struct daemon *d, char **ret, size_t *ret_len)
{
	struct dev_counters dc = { 0 };
	uint64_t dropped = 0;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;
	int r = 0;

	if (!d->metrics)
		return -EINVAL;
	if (d->bg)
		r = dev_collect(d, d->metrics->ncpus, &dc);
	if (r == 0 && d->bg)
		r = bpfgate_events_dropped(d->bg, d->metrics->ncpus, &dropped);
	f = r == 0 ? open_memstream(&buf, &len) : NULL;
	if (r == 0 && !f)
		r = -errno;
	if (f) {
		write_state(f, d);
		write_gpu_time(f, d);
		write_instances(f, d);
		write_daemon(f, d->metrics, d->events, dropped);
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
