// SPDX-License-Identifier: Apache-2.0
/* Metrics exposition text, listen addresses, and denial events as clients see them. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "view/events.h"
#include "view/metrics_page.h"
#include "view/view.h"
#include "jsonutil.h"
#include "metrics/metrics.h"
#include "metrics/promtext.h"
#include "sys/listen_addr.h"

/* Runs write(f) on a memory stream and returns what it wrote. */
static char *capture(void (*write)(FILE *f, const void *arg), const void *arg)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	write(f, arg);
	assert_int_equal(fclose(f), 0);
	return buf;
}

static void write_escaped(FILE *f, const void *arg)
{
	promtext_escaped(f, arg);
}

static void test_escape(void **state)
{
	auto_free char *out = capture(write_escaped, "a\\b\"c\nd/é");

	(void)state;
	assert_string_equal(out, "a\\\\b\\\"c\\nd/é");
}

static void write_sample(FILE *f, const void *arg)
{
	const struct promtext_label labels[] = { { "container", arg }, { "gpu", NULL } };

	promtext_family(f, "devgate_x_total", "counter", "Things.");
	promtext_sample(f, "devgate_x_total", labels, 2, 18446744073709551615ull);
	promtext_sample(f, "devgate_x_total", NULL, 0, 0);
}

static void test_sample(void **state)
{
	auto_free char *out = capture(write_sample, "job \"7\"");

	(void)state;
	assert_string_equal(out, "# HELP devgate_x_total Things.\n"
				 "# TYPE devgate_x_total counter\n"
				 "devgate_x_total{container=\"job \\\"7\\\"\",gpu=\"\"} "
				 "18446744073709551615\n"
				 "devgate_x_total 0\n");
}

static void write_histogram(FILE *f, const void *arg)
{
	promtext_histogram_write(f, "devgate_t_seconds", "Time.", arg);
}

static void test_histogram(void **state)
{
	static const double bounds[] = { 0.0005, 0.001, 0.25, 1 };
	struct promtext_histogram h;
	auto_free char *out = NULL;

	(void)state;
	promtext_histogram_init(&h, bounds, ARRAY_SIZE(bounds));
	promtext_histogram_observe(&h, 0.0001);
	promtext_histogram_observe(&h, 0.001); /* a bound belongs to its bucket ("le") */
	promtext_histogram_observe(&h, 0.2);
	promtext_histogram_observe(&h, 3);
	out = capture(write_histogram, &h);
	assert_string_equal(out, "# HELP devgate_t_seconds Time.\n"
				 "# TYPE devgate_t_seconds histogram\n"
				 "devgate_t_seconds_bucket{le=\"0.0005\"} 1\n"
				 "devgate_t_seconds_bucket{le=\"0.001\"} 2\n"
				 "devgate_t_seconds_bucket{le=\"0.25\"} 3\n"
				 "devgate_t_seconds_bucket{le=\"1\"} 3\n"
				 "devgate_t_seconds_bucket{le=\"+Inf\"} 4\n"
				 "devgate_t_seconds_sum 3.2011\n"
				 "devgate_t_seconds_count 4\n");
}

static void test_access(void **state)
{
	char buf[8];

	(void)state;
	view_access_str(DG_ACC_READ, buf, sizeof(buf));
	assert_string_equal(buf, "r");
	view_access_str(DG_ACC_READ | DG_ACC_WRITE, buf, sizeof(buf));
	assert_string_equal(buf, "rw");
	view_access_str(DG_ACC_MKNOD, buf, sizeof(buf));
	assert_string_equal(buf, "m");
	view_access_str(DG_ACC_MKNOD | DG_ACC_READ | DG_ACC_WRITE, buf, sizeof(buf));
	assert_string_equal(buf, "rwm");
}

static void test_parse_listen(void **state)
{
	static const char *const bad[] = {
		"",
		"9400",
		":9400",
		"127.0.0.1",
		"127.0.0.1:",
		"127.0.0.1:0",
		"127.0.0.1:65536",
		"127.0.0.1:+80",
		"127.0.0.1:80x",
		"localhost:9400",
		"::1:9400",
		"[::1]",
		"[::1]9400",
		"[127.0.0.1]:9400",
		"[]:9400",
		"300.0.0.1:9400",
	};
	struct sockaddr_storage ss;
	socklen_t len = 0;
	char addr[INET6_ADDRSTRLEN];

	(void)state;
	assert_int_equal(listen_addr_parse("127.0.0.1:9400", &ss, &len), 0);
	assert_int_equal(ss.ss_family, AF_INET);
	assert_int_equal(len, sizeof(struct sockaddr_in));
	assert_int_equal(ntohs(((struct sockaddr_in *)&ss)->sin_port), 9400);
	inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, addr, sizeof(addr));
	assert_string_equal(addr, "127.0.0.1");

	assert_int_equal(listen_addr_parse("[::1]:65535", &ss, &len), 0);
	assert_int_equal(ss.ss_family, AF_INET6);
	assert_int_equal(len, sizeof(struct sockaddr_in6));
	assert_int_equal(ntohs(((struct sockaddr_in6 *)&ss)->sin6_port), 65535);

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		if (listen_addr_parse(bad[i], &ss, &len) != -EINVAL)
			fail_msg("'%s' was accepted", bad[i]);
	}
}

/* ---- a fake daemon: two GPUs on major 195, one lease ---- */

static struct dg_gpu gpus[2];
static struct dg_inventory inv = {
	.majors = { .has_nvidia = true, .nvidia = 195, .has_uvm = true, .uvm = 510 },
	.gpus = gpus,
	.n_gpus = 2,
	.ctl = { { "nvidiactl", 195, 255 },
		 { "nvidia-uvm", 510, 0 },
		 { "nvidia-uvm-tools", 510, 1 } },
	.n_ctl = 3,
};
static struct daemon d = { .inv = &inv };

static int setup(void **state)
{
	struct lease *l = lease_new(4242);

	(void)state;
	for (unsigned int i = 0; i < 2; i++) {
		gpus[i] = (struct dg_gpu){ .index = i, .minor = i };
		snprintf(gpus[i].uuid, sizeof(gpus[i].uuid), "GPU-%08x-0000", 0xa0 + i);
	}
	assert_non_null(l);
	l->cgroup = strdup("/job\\7");
	l->container = strdup("job \"7\"");
	assert_int_equal(lease_add_gpu(l, &gpus[1], false), 1);
	assert_int_equal(lease_table_add(&d.leases, l), 0);
	return metrics_new(&d.metrics);
}

static int teardown(void **state)
{
	(void)state;
	lease_table_clear(&d.leases);
	metrics_free(d.metrics);
	d.metrics = NULL;
	return 0;
}

static bool is_name(const char *s, size_t len)
{
	if (len == 0 || !(isalpha((unsigned char)s[0]) || s[0] == '_' || s[0] == ':'))
		return false;
	for (size_t i = 1; i < len; i++) {
		if (!(isalnum((unsigned char)s[i]) || s[i] == '_' || s[i] == ':'))
			return false;
	}
	return true;
}

/* Skips {name="value",...}; NULL when malformed. */
static const char *skip_labels(const char *p)
{
	if (*p != '{')
		return p;
	p++;
	while (*p != '}') {
		const char *eq = strchr(p, '=');

		if (!eq || !is_name(p, (size_t)(eq - p)) || eq[1] != '"')
			return NULL;
		for (p = eq + 2; *p != '"'; p++) {
			if (*p == '\0' || *p == '\n')
				return NULL;
			if (*p == '\\' && !strchr("\\\"n", *++p))
				return NULL;
		}
		p++;
		if (*p == ',')
			p++;
		else if (*p != '}')
			return NULL;
	}
	return p + 1;
}

/* A line of the text format: comment, or name{labels} value. */
static void check_line(const char *line, char *family, size_t family_len)
{
	const char *p = line, *sp;
	size_t len = 0;
	char *end;

	if (strncmp(line, "# HELP ", 7) == 0 || strncmp(line, "# TYPE ", 7) == 0) {
		sp = strchr(line + 7, ' ');
		if (!sp || !is_name(line + 7, (size_t)(sp - line - 7)))
			fail_msg("bad comment line '%s'", line);
		if (line[2] == 'T')
			snprintf(family, family_len, "%.*s", (int)(sp - line - 7), line + 7);
		return;
	}
	while (p[len] && p[len] != '{' && p[len] != ' ')
		len++;
	if (!is_name(p, len) || strncmp(p, family, strlen(family)) != 0)
		fail_msg("sample '%s' outside its family '%s'", line, family);
	p = skip_labels(p + len);
	if (!p || *p != ' ')
		fail_msg("bad labels in '%s'", line);
	(void)strtod(p + 1, &end);
	if (end == p + 1 || *end != '\0')
		fail_msg("bad value in '%s'", line);
}

static void check_document(char *doc)
{
	char family[128] = "";
	char *save = NULL;

	assert_true(doc[0] && doc[strlen(doc) - 1] == '\n');
	for (char *line = strtok_r(doc, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		check_line(line, family, sizeof(family));
}

static void test_render(void **state)
{
	auto_free char *doc = NULL;
	size_t len = 0;

	(void)state;
	metrics_inc(d.metrics, METRIC_GRANTS, 2);
	metrics_request_failed(d.metrics, DG_OP_GRANT, DG_E_UNAVAILABLE);
	metrics_request_failed(d.metrics, DG_OP_MAX, DG_E_PROTOCOL);
	metrics_hook_call(d.metrics, "hook/createRuntime");
	metrics_hook_call(d.metrics, "hook/\"}evil");
	metrics_hook_call(d.metrics, "devgatectl");
	metrics_observe(d.metrics, DG_OP_GRANT, 3000000);
	assert_int_equal(metrics_render(&d, &doc, &len), 0);
	assert_int_equal(len, strlen(doc));
	assert_non_null(strstr(doc, "\ndevgate_leases 1\n"));
	assert_non_null(strstr(doc, "\ndevgate_gpus{state=\"free\"} 1\n"
				    "devgate_gpus{state=\"held\"} 1\n"
				    "devgate_gpus{state=\"shared\"} 0\n"));
	assert_non_null(strstr(doc, "\ndevgate_grants_total 2\n"));
	assert_non_null(strstr(doc, "\ndevgate_request_failures_total{op=\"grant\","
				    "reason=\"gpu_unavailable\"} 1\n"));
	assert_non_null(strstr(doc, "\ndevgate_request_failures_total{op=\"unknown\","
				    "reason=\"protocol\"} 1\n"));
	assert_non_null(strstr(doc, "\ndevgate_hook_calls_total{stage=\"createRuntime\"} 1\n"));
	assert_non_null(strstr(doc, "\ndevgate_hook_calls_total{stage=\"other\"} 1\n"));
	assert_non_null(strstr(doc, "\ndevgate_grant_duration_seconds_bucket{le=\"0.0025\"} 0\n"
				    "devgate_grant_duration_seconds_bucket{le=\"0.005\"} 1\n"));
	assert_null(strstr(doc, "evil"));
	check_document(doc);
}

static void test_find_node(void **state)
{
	const struct dg_gpu *gpu = NULL;
	char path[64];

	(void)state;
	assert_true(inventory_find_node(&inv, 195, 1, path, sizeof(path), &gpu));
	assert_string_equal(path, "/dev/nvidia1");
	assert_ptr_equal(gpu, &gpus[1]);
	assert_true(inventory_find_node(&inv, 195, 255, path, sizeof(path), &gpu));
	assert_string_equal(path, "/dev/nvidiactl");
	assert_null(gpu);
	assert_true(inventory_find_node(&inv, 510, 1, path, sizeof(path), &gpu));
	assert_string_equal(path, "/dev/nvidia-uvm-tools");
	assert_false(inventory_find_node(&inv, 195, 7, path, sizeof(path), &gpu));
	assert_string_equal(path, "");
	assert_false(inventory_find_node(&inv, 1, 3, path, sizeof(path), &gpu));
}

static void test_event_json(void **state)
{
	struct dg_event ev = { .cgroup_id = 4242,
			       .type = DG_DEV_CHAR,
			       .major = 195,
			       .minor = 0,
			       .access = DG_ACC_READ | DG_ACC_WRITE };
	struct dg_denied_event known, stranger;
	struct dg_arena a = { 0 };
	auto_json json_object *o = NULL;

	(void)state;
	assert_int_equal(events_describe(d.inv, &d.leases, &ev, 1795274890123, &known, &a), 0);
	o = dg_encode(&dg_denied_event_schema, &known);
	assert_string_equal(json_get_str(o, "time"), "2026-11-21T15:28:10.123Z");
	assert_string_equal(json_get_str(o, "container"), "job \"7\"");
	assert_string_equal(json_get_str(o, "cgroup"), "/job\\7");
	/* A string, as in leases: JSON numbers lose precision above 2^53. */
	assert_string_equal(json_get_str(o, "cgroup_id"), "4242");
	assert_string_equal(json_get_str(o, "device"), "c 195:0");
	assert_string_equal(json_get_str(o, "node"), "/dev/nvidia0");
	assert_string_equal(json_get_str(o, "gpu"), gpus[0].uuid);
	assert_string_equal(json_get_str(o, "access"), "rw");

	ev.cgroup_id = 99;
	ev.major = 4;
	ev.access = DG_ACC_MKNOD;
	assert_int_equal(events_describe(d.inv, &d.leases, &ev, 0, &stranger, &a), 0);
	assert_null(stranger.container);
	assert_null(stranger.cgroup);
	assert_true(stranger.cgroup_id == 99);
	assert_string_equal(stranger.device, "c 4:0");
	assert_null(stranger.node);
	assert_null(stranger.gpu);
	assert_string_equal(stranger.access, "m");
	dg_arena_free(&a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_escape),
		cmocka_unit_test(test_sample),
		cmocka_unit_test(test_histogram),
		cmocka_unit_test(test_access),
		cmocka_unit_test(test_parse_listen),
		cmocka_unit_test_setup_teardown(test_render, setup, teardown),
		cmocka_unit_test_setup_teardown(test_find_node, setup, teardown),
		cmocka_unit_test_setup_teardown(test_event_json, setup, teardown),
	};

	return cmocka_run_group_tests_name("metrics", tests, NULL, NULL);
}
