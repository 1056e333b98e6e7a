// SPDX-License-Identifier: Apache-2.0
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/libbpf.h>

#include "events.h"
#include "jsonutil.h"
#include "log.h"
#include "metrics.h"
#include "util.h"

struct events {
	struct daemon *d;
	struct ring_buffer *rb;
	json_object *recent[EVENTS_RECENT]; /* a ring; head is the next slot */
	size_t head;
	size_t n;
	uint64_t received;
};

json_object *events_to_json(const struct daemon *d, const struct dg_event *ev, int64_t wall_ms)
{
	const struct lease *l = lease_table_find(&d->leases, ev->cgroup_id);
	const struct dg_gpu *gpu = NULL;
	char when[48], id[24], dev[32], node[64], access[8];
	bool known = ev->type == DG_DEV_CHAR &&
		     inventory_find_node(d->inv, ev->major, ev->minor, node, sizeof(node), &gpu);
	json_object *o = json_object_new_object();

	format_time_utc_ms(wall_ms, when, sizeof(when));
	snprintf(id, sizeof(id), "%llu", (unsigned long long)ev->cgroup_id);
	snprintf(dev, sizeof(dev), "%c %u:%u", ev->type == DG_DEV_BLOCK ? 'b' : 'c', ev->major,
		 ev->minor);
	metrics_access_str(ev->access, access, sizeof(access));
	json_add_str(o, "time", when);
	json_add_str(o, "type", "denied");
	json_add_str(o, "container", l ? lease_label(l) : NULL);
	json_add_str(o, "cgroup", l ? l->cgroup : NULL);
	/* A string, as in leases: JSON numbers lose precision above 2^53. */
	json_add_str(o, "cgroup_id", id);
	json_add_str(o, "device", dev);
	json_add_str(o, "node", known ? node : NULL);
	json_add_str(o, "gpu", gpu ? gpu->uuid : NULL);
	json_add_str(o, "access", access);
	return o;
}

static void keep(struct events *e, json_object *ev)
{
	if (e->recent[e->head])
		json_object_put(e->recent[e->head]);
	e->recent[e->head] = json_object_get(ev);
	e->head = (e->head + 1) % EVENTS_RECENT;
	if (e->n < EVENTS_RECENT)
		e->n++;
}

/* The event's monotonic stamp, moved to the wall clock. */
static int64_t wall_ms_of(uint64_t mono_ns)
{
	uint64_t now_mono = now_mono_ns(), now_real = now_real_ns();
	uint64_t age = now_mono > mono_ns ? now_mono - mono_ns : 0;

	return (int64_t)((now_real - age) / 1000000);
}

static int on_sample(void *ctx, void *data, size_t size)
{
	struct events *e = ctx;
	struct dg_event ev;
	json_object *o;

	if (size < sizeof(ev))
		return 0; /* not ours to interpret; keep reading */
	memcpy(&ev, data, sizeof(ev));
	o = events_to_json(e->d, &ev, wall_ms_of(ev.ts_ns));
	e->received++;
	keep(e, o);
	log_debug("denied: %s", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
	server_broadcast(e->d, "events", o);
	json_object_put(o);
	return 0;
}

int events_open(struct daemon *d, struct dg_error *err)
{
	struct events *e = calloc(1, sizeof(*e));

	if (!e)
		return dg_error_set(err, DG_E_INTERNAL, ENOMEM, "out of memory");
	e->d = d;
	e->rb = ring_buffer__new(bpfgate_events_fd(d->bg), on_sample, e, NULL);
	if (!e->rb) {
		int r = -errno;

		free(e);
		return dg_error_set(err, DG_E_KERNEL, r, "cannot read devgate's BPF ring buffer: %s",
				    strerror(-r));
	}
	d->events = e;
	return 0;
}

void events_free(struct events *e)
{
	if (!e)
		return;
	ring_buffer__free(e->rb);
	for (size_t i = 0; i < EVENTS_RECENT; i++)
		json_object_put(e->recent[i]);
	free(e);
}

int events_fd(const struct events *e)
{
	return ring_buffer__epoll_fd(e->rb);
}

void events_consume(struct daemon *d)
{
	int r = ring_buffer__consume(d->events->rb);

	if (r < 0)
		log_warning_errno(r, "cannot read denial events: %m");
}

json_object *events_recent(const struct events *e)
{
	json_object *a = json_object_new_array();
	size_t first = (e->head + EVENTS_RECENT - e->n) % EVENTS_RECENT;

	for (size_t i = 0; i < e->n; i++)
		json_object_array_add(a, json_object_get(e->recent[(first + i) % EVENTS_RECENT]));
	return a;
}

uint64_t events_received(const struct events *e)
{
	return e->received;
}
