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
 * From the daemon:
 *   devgate_build_info{version}            always 1
 *   devgate_leases                         leases held now
 *   devgate_gpus{state}                    GPUs free, held, shared, unusable
 *   devgate_grants_total                   grant requests served
 *   devgate_revokes_total                  revoke requests served
 *   devgate_releases_total                 leases released because the container ended
 *   devgate_request_failures_total{op,reason}  failed requests by error code name
 *   devgate_grant_duration_seconds         histogram of grant request latency
 *   devgate_revoke_duration_seconds        histogram of revoke request latency
 *   devgate_reconcile_corrections_total    fixes by start-up reconcile and re-checks
 *   devgate_hook_calls_total{stage}        requests from the OCI hook, by stage
 *   devgate_denial_events_total            denial events read from the BPF ring buffer
 *   devgate_denial_events_dropped_total    denial events lost to a full ring buffer
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <microhttpd.h>

#include "cleanup.h"
#include "events.h"
#include "log.h"
#include "metrics.h"
#include "util.h"
#include "version.h"
#include "view.h"

#define HTTP_CONN_LIMIT 16
#define HTTP_CONN_TIMEOUT_S 10
#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* OCI hook stages; anything else a hook sends is counted as "other". */
static const char *const hook_stages[] = {
	"prestart",	  "createRuntime", "createContainer", "startContainer",
	"poststart",	  "poststop",	   "other",
};

/* 0.5 ms to 1 s: a grant forks a helper and touches BPF and the disk. */
static const double duration_bounds[] = { 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
					  0.05,	  0.1,	 0.25,	 0.5,	1 };

struct metrics {
	uint64_t counters[METRIC_COUNTER_MAX];
	uint64_t failures[DG_OP_MAX + 1][DG_CODE_MAX]; /* [DG_OP_MAX]: unparsed requests */
	uint64_t hook_calls[ARRAY_SIZE(hook_stages)];
	struct metrics_histogram grant_time;
	struct metrics_histogram revoke_time;
	int ncpus;
	struct MHD_Daemon *mhd;
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
	[METRIC_RECONCILE_FIXES] = { "devgate_reconcile_corrections_total",
				     "Corrections made to the kernel by start-up reconciliation "
				     "and the periodic re-check of gates." },
};

/* ---- exposition text ---- */

void metrics_write_escaped(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\')
			fputs("\\\\", f);
		else if (*s == '"')
			fputs("\\\"", f);
		else if (*s == '\n')
			fputs("\\n", f);
		else
			fputc(*s, f);
	}
}

void metrics_write_family(FILE *f, const char *name, const char *type, const char *help)
{
	/* HELP text escapes backslash and newline only; ours has neither. */
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void write_labels(FILE *f, const struct metrics_label *labels, size_t n)
{
	if (n == 0)
		return;
	fputc('{', f);
	for (size_t i = 0; i < n; i++) {
		fprintf(f, "%s%s=\"", i ? "," : "", labels[i].name);
		metrics_write_escaped(f, labels[i].value ? labels[i].value : "");
		fputc('"', f);
	}
	fputc('}', f);
}

void metrics_write_sample(FILE *f, const char *name, const struct metrics_label *labels,
			  size_t n_labels, uint64_t value)
{
	fputs(name, f);
	write_labels(f, labels, n_labels);
	fprintf(f, " %llu\n", (unsigned long long)value);
}

void metrics_histogram_init(struct metrics_histogram *h, const double *bounds, size_t n)
{
	*h = (struct metrics_histogram){ .bounds = bounds };
	h->n_bounds = n < METRICS_MAX_BUCKETS ? n : METRICS_MAX_BUCKETS - 1;
}

void metrics_histogram_observe(struct metrics_histogram *h, double v)
{
	size_t i = 0;

	while (i < h->n_bounds && v > h->bounds[i])
		i++;
	h->counts[i]++; /* i == n_bounds: the +Inf bucket */
	h->count++;
	h->sum += v;
}

void metrics_histogram_write(FILE *f, const char *name, const char *help,
			     const struct metrics_histogram *h)
{
	uint64_t cumulative = 0;

	metrics_write_family(f, name, "histogram", help);
	for (size_t i = 0; i <= h->n_bounds; i++) {
		cumulative += h->counts[i];
		if (i < h->n_bounds)
			fprintf(f, "%s_bucket{le=\"%g\"} %llu\n", name, h->bounds[i],
				(unsigned long long)cumulative);
		else
			fprintf(f, "%s_bucket{le=\"+Inf\"} %llu\n", name,
				(unsigned long long)cumulative);
	}
	fprintf(f, "%s_sum %.9g\n%s_count %llu\n", name, h->sum, name,
		(unsigned long long)h->count);
}

static int parse_host_port(const char *s, char *host, size_t host_len, uint32_t *port,
			   bool *bracketed)
{
	const char *sep;
	size_t len;

	*bracketed = s[0] == '[';
	if (*bracketed) {
		const char *end = strchr(s, ']');

		if (!end || end[1] != ':')
			return -EINVAL;
		s++;
		len = (size_t)(end - s);
		sep = end + 1;
	} else {
		sep = strrchr(s, ':');
		if (!sep)
			return -EINVAL;
		len = (size_t)(sep - s);
	}
	if (len == 0 || len >= host_len)
		return -EINVAL;
	memcpy(host, s, len);
	host[len] = '\0';
	if (parse_u32(sep + 1, port) < 0 || *port == 0 || *port > 65535)
		return -EINVAL;
	return 0;
}

int metrics_parse_listen(const char *s, struct sockaddr_storage *ret, socklen_t *ret_len)
{
	char host[INET6_ADDRSTRLEN];
	struct sockaddr_storage ss = { 0 };
	bool bracketed;
	uint32_t port;
	int r = parse_host_port(s, host, sizeof(host), &port, &bracketed);

	if (r < 0)
		return r;
	if (bracketed) {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;

		if (inet_pton(AF_INET6, host, &sin6->sin6_addr) != 1)
			return -EINVAL;
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons((uint16_t)port);
		*ret_len = sizeof(*sin6);
	} else {
		struct sockaddr_in *sin = (struct sockaddr_in *)&ss;

		if (inet_pton(AF_INET, host, &sin->sin_addr) != 1)
			return -EINVAL;
		sin->sin_family = AF_INET;
		sin->sin_port = htons((uint16_t)port);
		*ret_len = sizeof(*sin);
	}
	*ret = ss;
	return 0;
}

/* ---- the registry ---- */

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
	metrics_histogram_init(&m->grant_time, duration_bounds, ARRAY_SIZE(duration_bounds));
	metrics_histogram_init(&m->revoke_time, duration_bounds, ARRAY_SIZE(duration_bounds));
	*ret = m;
	return 0;
}

void metrics_free(struct metrics *m)
{
	if (!m)
		return;
	if (m->mhd)
		MHD_stop_daemon(m->mhd);
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
		metrics_histogram_observe(&m->grant_time, (double)ns / 1e9);
	else if (op == DG_OP_REVOKE)
		metrics_histogram_observe(&m->revoke_time, (double)ns / 1e9);
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

	if (dc->n == dc->cap) {
		size_t ncap = dc->cap ? dc->cap * 2 : 64;
		struct dev_series *nv = realloc(dc->v, ncap * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		dc->v = nv;
		dc->cap = ncap;
	}
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
	       (k->major == DEV_OTHER || (inv->majors.has_nvidia && k->major == inv->majors.nvidia) ||
		(inv->majors.has_uvm && k->major == inv->majors.uvm));
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

enum { DEV_LABELS = 7 };

static void dev_labels(const struct daemon *d, const struct dev_series *s, struct dev_text *t,
		       struct metrics_label *labels)
{
	const struct dg_gpu *gpu = NULL;

	if (s->key.major == DEV_OTHER)
		snprintf(t->device, sizeof(t->device), "other");
	else
		snprintf(t->device, sizeof(t->device), "%u:%u", s->key.major, s->key.minor);
	if (s->key.type != DG_DEV_CHAR ||
	    !inventory_find_node(d->inv, s->key.major, s->key.minor, t->node, sizeof(t->node), &gpu))
		t->node[0] = '\0';
	t->gpu = gpu ? gpu->uuid : "";
	view_access_str(s->key.access, t->access, sizeof(t->access));
	labels[0] = (struct metrics_label){ "container", s->lease->container };
	labels[1] = (struct metrics_label){ "cgroup", s->lease->cgroup };
	labels[2] = (struct metrics_label){ "type", s->key.type == DG_DEV_BLOCK ? "b" : "c" };
	labels[3] = (struct metrics_label){ "device", t->device };
	labels[4] = (struct metrics_label){ "node", t->node };
	labels[5] = (struct metrics_label){ "gpu", t->gpu };
	labels[6] = (struct metrics_label){ "access", t->access };
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
		metrics_write_family(f, dev_families[k].name, "counter", dev_families[k].help);
		for (size_t i = 0; i < dc->n; i++) {
			const struct dev_series *s = &dc->v[i];
			struct metrics_label labels[DEV_LABELS];
			struct dev_text t = { 0 };
			uint64_t v;

			if (dev_families[k].gpu_only && !gpu_class(d->inv, &s->key))
				continue;
			dev_labels(d, s, &t, labels);
			memcpy(&v, (const char *)&s->val + dev_families[k].offset, sizeof(v));
			metrics_write_sample(f, dev_families[k].name, labels, DEV_LABELS, v);
		}
	}
	metrics_write_family(f, "devgate_bpf_counters_map_entries", "gauge",
			     "Keys in the BPF device counters map, of every cgroup.");
	metrics_write_sample(f, "devgate_bpf_counters_map_entries", NULL, 0, dc->entries);
	metrics_write_family(f, "devgate_bpf_counters_map_capacity", "gauge",
			     "Size of the BPF device counters map; once full, new keys go uncounted.");
	metrics_write_sample(f, "devgate_bpf_counters_map_capacity", NULL, 0, DG_MAX_COUNTERS);
}

/* ---- the daemon's own metrics ---- */

static void write_state(FILE *f, struct daemon *d)
{
	static const char *const states[] = { "free", "held", "shared", "unusable" };
	struct metrics_label label = { "version", DEVGATE_VERSION };

	metrics_write_family(f, "devgate_build_info", "gauge", "devgated's version; always 1.");
	metrics_write_sample(f, "devgate_build_info", &label, 1, 1);
	metrics_write_family(f, "devgate_leases", "gauge", "Leases held now.");
	metrics_write_sample(f, "devgate_leases", NULL, 0, d->leases.n);
	metrics_write_family(f, "devgate_gpus", "gauge", "GPUs on this host by state.");
	for (size_t s = 0; s < ARRAY_SIZE(states); s++) {
		uint64_t n = 0;

		for (size_t i = 0; i < d->inv->n_gpus; i++)
			n += strcmp(view_gpu_state(d, &d->inv->gpus[i]), states[s]) == 0;
		label = (struct metrics_label){ "state", states[s] };
		metrics_write_sample(f, "devgate_gpus", &label, 1, n);
	}
}

static void write_failures(FILE *f, const struct metrics *m)
{
	static const char name[] = "devgate_request_failures_total";

	metrics_write_family(f, name, "counter",
			     "Requests that failed, by operation and error code name.");
	for (int op = 0; op <= DG_OP_MAX; op++) {
		for (int code = 0; code < DG_CODE_MAX; code++) {
			struct metrics_label labels[2] = {
				{ "op", op < DG_OP_MAX ? dg_op_info(op)->name : "unknown" },
				{ "reason", dg_code_info(code)->name },
			};

			if (m->failures[op][code])
				metrics_write_sample(f, name, labels, 2, m->failures[op][code]);
		}
	}
}

static void write_daemon(FILE *f, const struct metrics *m, const struct events *ev,
			 uint64_t dropped)
{
	for (int c = 0; c < METRIC_COUNTER_MAX; c++) {
		metrics_write_family(f, counter_info[c].name, "counter", counter_info[c].help);
		metrics_write_sample(f, counter_info[c].name, NULL, 0, m->counters[c]);
	}
	write_failures(f, m);
	metrics_histogram_write(f, "devgate_grant_duration_seconds",
				"Time devgated took to serve a grant request.", &m->grant_time);
	metrics_histogram_write(f, "devgate_revoke_duration_seconds",
				"Time devgated took to serve a revoke request.", &m->revoke_time);
	metrics_write_family(f, "devgate_hook_calls_total", "counter",
			     "Grant and revoke requests from the OCI hook, by hook stage.");
	for (size_t i = 0; i < ARRAY_SIZE(hook_stages); i++) {
		struct metrics_label label = { "stage", hook_stages[i] };

		metrics_write_sample(f, "devgate_hook_calls_total", &label, 1, m->hook_calls[i]);
	}
	metrics_write_family(f, "devgate_denial_events_total", "counter",
			     "Denial events read from the BPF ring buffer (rate-limited in BPF to "
			     "one per container and device per second).");
	metrics_write_sample(f, "devgate_denial_events_total", NULL, 0,
			     ev ? events_received(ev) : 0);
	metrics_write_family(f, "devgate_denial_events_dropped_total", "counter",
			     "Denial events the BPF ring buffer had no room for, because devgated "
			     "read too slowly; counters are not affected.");
	metrics_write_sample(f, "devgate_denial_events_dropped_total", NULL, 0, dropped);
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

/* ---- HTTP, driven by devgated's epoll loop ---- */

__attribute__((format(printf, 2, 0))) static void http_log(void *cls, const char *fmt, va_list ap)
{
	char buf[512];
	size_t len;

	(void)cls;
	vsnprintf(buf, sizeof(buf), fmt, ap);
	len = strlen(buf);
	while (len && buf[len - 1] == '\n')
		buf[--len] = '\0';
	log_warning("metrics endpoint: %s", buf);
}

static enum MHD_Result respond(struct MHD_Connection *conn, unsigned int status, char *body,
			       size_t len, enum MHD_ResponseMemoryMode mode, bool allow)
{
	struct MHD_Response *resp = MHD_create_response_from_buffer(len, body, mode);
	enum MHD_Result r;

	if (!resp) {
		if (mode == MHD_RESPMEM_MUST_FREE)
			free(body);
		return MHD_NO;
	}
	(void)MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, CONTENT_TYPE);
	if (allow)
		(void)MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	r = MHD_queue_response(conn, status, resp);
	MHD_destroy_response(resp);
	return r;
}

static enum MHD_Result respond_text(struct MHD_Connection *conn, unsigned int status,
				    const char *text, bool allow)
{
	/* PERSISTENT: MHD neither copies nor frees a static string. */
	return respond(conn, status, (char *)text, strlen(text), MHD_RESPMEM_PERSISTENT, allow);
}

static enum MHD_Result http_request(void *cls, struct MHD_Connection *conn, const char *url,
				    const char *method, const char *version, const char *upload_data,
				    size_t *upload_data_size, void **req_cls)
{
	struct daemon *d = cls;
	char *doc = NULL;
	size_t len = 0;
	int r;

	(void)version;
	(void)upload_data;
	(void)upload_data_size;
	(void)req_cls;
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
		return respond_text(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "GET or HEAD only\n", true);
	if (strcmp(url, "/metrics") != 0)
		return respond_text(conn, MHD_HTTP_NOT_FOUND, "devgated serves /metrics only\n",
				    false);
	r = metrics_render(d, &doc, &len);
	if (r < 0) {
		log_error_errno(r, "cannot render metrics: %m");
		return respond_text(conn, MHD_HTTP_INTERNAL_SERVER_ERROR,
				    "cannot render metrics; see devgated's log\n", false);
	}
	return respond(conn, MHD_HTTP_OK, doc, len, MHD_RESPMEM_MUST_FREE, false);
}

int metrics_http_start(struct daemon *d, const char *listen, struct dg_error *err)
{
	struct sockaddr_storage ss;
	socklen_t ss_len;
	unsigned int flags = MHD_USE_EPOLL | MHD_USE_ERROR_LOG;
	uint16_t port;

	if (metrics_parse_listen(listen, &ss, &ss_len) < 0) {
		dg_error_set(err, DG_E_INVALID, EINVAL, "--metrics-listen: '%s' is not ADDR:PORT",
			     listen);
		dg_error_hint(err, "give a numeric address, e.g. 127.0.0.1:9400 or [::1]:9400");
		return -EINVAL;
	}
	if (ss.ss_family == AF_INET6) {
		flags |= MHD_USE_IPv6;
		port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	} else {
		port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
	}
	/* No MHD_USE_INTERNAL_POLLING_THREAD: devgated must stay single-threaded. */
	/* The logger first, or MHD logs the other options' problems itself. */
	d->metrics->mhd = MHD_start_daemon(flags, port, NULL, NULL, http_request, d,
					   MHD_OPTION_EXTERNAL_LOGGER, http_log, NULL,
					   MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
					   MHD_OPTION_CONNECTION_LIMIT, (unsigned int)HTTP_CONN_LIMIT,
					   MHD_OPTION_CONNECTION_TIMEOUT,
					   (unsigned int)HTTP_CONN_TIMEOUT_S, MHD_OPTION_END);
	if (!d->metrics->mhd) {
		dg_error_set(err, DG_E_INTERNAL, EADDRNOTAVAIL, "cannot serve metrics on %s", listen);
		dg_error_hint(err, "is the address local and the port free? the log above says more");
		return -EADDRNOTAVAIL;
	}
	log_info("serving Prometheus metrics at http://%s/metrics", listen);
	return 0;
}

int metrics_http_fd(const struct metrics *m)
{
	const union MHD_DaemonInfo *info;

	if (!m || !m->mhd)
		return -1;
	info = MHD_get_daemon_info(m->mhd, MHD_DAEMON_INFO_EPOLL_FD);
	return info ? info->epoll_fd : -1;
}

int metrics_http_timeout(struct metrics *m)
{
	MHD_UNSIGNED_LONG_LONG ms;

	if (!m || !m->mhd || MHD_get_timeout(m->mhd, &ms) != MHD_YES)
		return -1;
	return ms > INT_MAX ? INT_MAX : (int)ms;
}

void metrics_http_run(struct metrics *m)
{
	if (m && m->mhd)
		(void)MHD_run(m->mhd);
}
