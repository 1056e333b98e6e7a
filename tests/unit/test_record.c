// SPDX-License-Identifier: Apache-2.0
/*
 * Lease records (daemon/lease/record.c): every field comes back as it went
 * out; the JSON written is exactly what older versions wrote (golden
 * records); records older than a key load with its default; a malformed
 * record is refused with a reason naming the field.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "driver.h"
#include "gpu.h"
#include "jsonutil.h"
#include "lease/lease.h"
#include "lease/record.h"
#include "record_golden.h"
#include "record_leases.h"

static void same_int(const char *what, long long a, long long b)
{
	if (a != b)
		fail_msg("%s differs: %lld, then %lld", what, a, b);
}

static void same_str(const char *what, const char *a, const char *b)
{
	if (!a || !b ? a != b : strcmp(a, b) != 0)
		fail_msg("%s differs: '%s', then '%s'", what, a ? a : "(null)", b ? b : "(null)");
}

/* The same for member m of element i of array a: "gpus[2].minor". */
static void same_int_at(const char *a, size_t i, const char *m, long long x, long long y)
{
	char what[64];

	snprintf(what, sizeof(what), "%s[%zu]%s%s", a, i, m[0] ? "." : "", m);
	same_int(what, x, y);
}

static void same_str_at(const char *a, size_t i, const char *m, const char *x, const char *y)
{
	char what[64];

	snprintf(what, sizeof(what), "%s[%zu]%s%s", a, i, m[0] ? "." : "", m);
	same_str(what, x, y);
}

static void same_gpu(size_t i, const struct lease_gpu *a, const struct lease_gpu *b)
{
#define SAME(m) same_int_at("gpus", i, #m, (long long)a->m, (long long)b->m)
	same_str_at("gpus", i, "uuid", a->uuid, b->uuid);
	SAME(family);
	SAME(minor);
	SAME(card);
	SAME(card_minor);
	SAME(instance);
	SAME(gi);
	SAME(n_caps);
	for (size_t c = 0; c < a->n_caps; c++)
		SAME(caps[c]);
	SAME(shared);
	SAME(since_ms);
	SAME(ms);
#undef SAME
}

static void same_device(size_t i, const struct lease_device *a, const struct lease_device *b)
{
	same_str_at("devices", i, "name", a->name, b->name);
	same_str_at("devices", i, "host", a->host, b->host);
	same_int_at("devices", i, "major", a->major, b->major);
	same_int_at("devices", i, "minor", a->minor, b->minor);
	same_int_at("devices", i, "access", a->access, b->access);
	same_int_at("devices", i, "block", a->block, b->block);
}

static void same_majors(const struct dg_majors *a, const struct dg_majors *b)
{
	same_int("majors.has_nvidia", a->has_nvidia, b->has_nvidia);
	same_int("majors.nvidia", a->nvidia, b->nvidia);
	same_int("majors.has_uvm", a->has_uvm, b->has_uvm);
	same_int("majors.uvm", a->uvm, b->uvm);
	same_int("majors.has_kfd", a->has_kfd, b->has_kfd);
	same_int("majors.kfd", a->kfd, b->kfd);
	same_int("majors.has_caps", a->has_caps, b->has_caps);
	same_int("majors.caps", a->caps, b->caps);
}

/*
 * Every stored member of struct lease and the structs it holds. A member
 * added to them stops record.c from compiling (a size check next to its
 * tables) until it has a table entry; add it here and to
 * record_lease_full() as well, and update this size.
 */
_Static_assert(sizeof(void *) != 8 || sizeof(struct lease) == 264,
	       "struct lease changed: compare the new member in same_lease()");
static void same_lease(const struct lease *a, const struct lease *b)
{
	same_int("cgid", (long long)a->cgid, (long long)b->cgid);
	same_str("cgroup", a->cgroup, b->cgroup);
	same_str("container", a->container, b->container);
	same_str("runtime", a->runtime, b->runtime);
	same_int("pid", a->pid, b->pid);
	same_int("since", a->since, b->since);
	same_int("n_gpus", (long long)a->n_gpus, (long long)b->n_gpus);
	for (size_t i = 0; i < a->n_gpus; i++)
		same_gpu(i, &a->gpus[i], &b->gpus[i]);
	same_int("n_devices", (long long)a->n_devices, (long long)b->n_devices);
	for (size_t i = 0; i < a->n_devices; i++)
		same_device(i, &a->devices[i], &b->devices[i]);
	same_int("expires", a->expires, b->expires);
	same_int("kill_on_expiry", a->kill_on_expiry, b->kill_on_expiry);
	same_int("v1_keyed", a->v1_keyed, b->v1_keyed);
	same_int("driver_caps", a->driver_caps, b->driver_caps);
	same_int("n_driver_files", (long long)a->n_driver_files, (long long)b->n_driver_files);
	for (size_t i = 0; i < a->n_driver_files; i++)
		same_str_at("driver_files", i, "", a->driver_files[i].path,
			    b->driver_files[i].path);
	same_int("n_driver_dirs", (long long)a->n_driver_dirs, (long long)b->n_driver_dirs);
	for (size_t i = 0; i < a->n_driver_dirs; i++) {
		same_str_at("driver_dirs", i, "path", a->driver_dirs[i].path,
			    b->driver_dirs[i].path);
		same_int_at("driver_dirs", i, "ino", (long long)a->driver_dirs[i].ino,
			    (long long)b->driver_dirs[i].ino);
	}
	same_int("n_spent", (long long)a->n_spent, (long long)b->n_spent);
	for (size_t i = 0; i < a->n_spent; i++) {
		same_str_at("spent", i, "uuid", a->spent[i].uuid, b->spent[i].uuid);
		same_int_at("spent", i, "ms", a->spent[i].ms, b->spent[i].ms);
	}
	same_int("has_majors", a->has_majors, b->has_majors);
	same_majors(&a->majors, &b->majors);
	same_str("root", a->root, b->root);
	assert_true(a->root_dev == b->root_dev && a->root_ino == b->root_ino);
	same_int("n_kept", (long long)a->n_kept, (long long)b->n_kept);
	for (size_t i = 0; i < a->n_kept; i++)
		same_str_at("kept", i, "", a->kept[i].path, b->kept[i].path);
	same_str("cg1_path", a->cg1_path, b->cg1_path);
	same_int("n_cg1_added", (long long)a->n_cg1_added, (long long)b->n_cg1_added);
	for (size_t i = 0; i < a->n_cg1_added; i++)
		same_str_at("cg1_added", i, "", a->cg1_added[i].rule, b->cg1_added[i].rule);
}

/* The record of l as state.c writes it: pretty and spaced. */
static char *record_text(const struct lease *l)
{
	auto_json json_object *o = record_encode(l);

	assert_non_null(o);
	return strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY |
								JSON_C_TO_STRING_SPACED));
}

static struct lease *decode_text(const char *text)
{
	auto_json json_object *o = json_parse_object(text);
	struct lease *l = NULL;
	char why[256] = "";

	assert_non_null(o);
	if (record_decode(o, &l, why, sizeof(why)) < 0)
		fail_msg("record refused: %s", why);
	return l;
}

/* Every field set to a value other than its default comes back the same, in a copy too. */
static void test_every_field(void **state)
{
	struct lease *l = record_lease_full(), *back, *copy;
	auto_free char *text = NULL;

	(void)state;
	/* cgroup v1's keys: not in the golden records, which older versions wrote. */
	l->cg1_path = strdup("/docker/ff00");
	l->cg1_added = calloc(2, sizeof(*l->cg1_added));
	l->n_cg1_added = 2;
	snprintf(l->cg1_added[0].rule, sizeof(l->cg1_added[0].rule), "c 195:0 rw");
	snprintf(l->cg1_added[1].rule, sizeof(l->cg1_added[1].rule), "c 195:255 w");
	l->v1_keyed = true;
	copy = lease_copy(l);
	text = record_text(l);
	back = decode_text(text);
	same_lease(l, back);
	same_lease(l, copy);
	/* Not defaults: a field the table lost would read back as one. */
	assert_true(l->gpus[0].family != DG_VENDOR_NVIDIA && l->gpus[0].card);
	assert_true(l->gpus[1].shared && l->gpus[2].instance && l->gpus[2].n_caps > 1);
	assert_true(l->devices[0].access && l->devices[1].block && l->expires);
	assert_true(l->kill_on_expiry && l->driver_caps && l->n_driver_files && l->n_spent);
	assert_true(l->n_driver_dirs && l->driver_dirs[0].ino > INT64_MAX);
	assert_true(l->has_majors && l->majors.has_nvidia && l->majors.has_uvm &&
		    l->majors.has_kfd && l->majors.has_caps);
	assert_true(l->container && l->pid && l->since && l->gpus[0].ms);
	assert_true(l->root && l->root_dev && l->root_ino && l->n_kept > 1);
	assert_true(l->cg1_path && l->n_cg1_added > 1 && l->v1_keyed);
	lease_free(l);
	lease_free(back);
	lease_free(copy);
}

struct golden {
	const char *name;
	struct lease *(*make)(void);
	const char *text;
};

static const struct golden goldens[] = {
	{ "plain", record_lease_plain, golden_plain },
	{ "devices", record_lease_devices, golden_devices },
	{ "full", record_lease_full, golden_full },
	{ "edges", record_lease_edges, golden_edges },
};

/* A runtime's name comes back with its runtime; older records have none. */
static void test_runtime(void **state)
{
	struct lease *l = record_lease_plain(), *back;
	auto_free char *text = NULL;

	(void)state;
	l->runtime = strdup("docker");
	text = record_text(l);
	assert_non_null(strstr(text, "\"runtime\": \"docker\""));
	back = decode_text(text);
	same_lease(l, back);
	lease_free(l);
	lease_free(back);
}

/* The exact JSON of older versions, and it reads back as the lease it came from. */
static void test_golden(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(goldens) / sizeof(goldens[0]); i++) {
		struct lease *l = goldens[i].make(), *back;
		auto_free char *text = record_text(l), *again = NULL;

		if (strcmp(text, goldens[i].text) != 0)
			fail_msg("record '%s' is not as before:\n%s", goldens[i].name, text);
		back = decode_text(goldens[i].text);
		same_lease(l, back);
		again = record_text(back);
		assert_string_equal(again, goldens[i].text);
		lease_free(l);
		lease_free(back);
	}
}

static void test_move_journal(void **state)
{
	struct lease *l = record_lease_plain(), *back = NULL;
	auto_json json_object *o = record_move_encode(l, 99), *in = NULL;
	char why[256] = "";
	uint64_t to = 0;

	(void)state;
	assert_string_equal(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY |
								      JSON_C_TO_STRING_SPACED),
			    golden_moving);
	in = json_parse_object(golden_moving);
	assert_int_equal(record_move_decode(in, &back, &to, why, sizeof(why)), 0);
	assert_int_equal(to, 99);
	same_lease(l, back);
	lease_free(back);
	back = NULL;
	json_object_object_del(in, "to");
	assert_int_equal(record_move_decode(in, &back, &to, why, sizeof(why)), -EINVAL);
	assert_null(back);
	assert_string_equal(why, "move journal: 'to' is missing");
	lease_free(l);
}

/*
 * A record from before each optional key: the first version's GPU (no
 * vendor, card, instance or GPU time), a device without type or access,
 * driver files as one string, no spent GPUs, expiry or majors.
 */
static const char old_record[] =
	"{\"format\":1,\"cgroup_id\":\"12\",\"cgroup\":\"/c\",\"container\":null,\"pid\":1,"
	"\"since\":1700000000,\"gpus\":[{\"uuid\":\"GPU-1\",\"minor\":1,\"shared\":false}],"
	"\"driver_caps\":2,\"driver_files\":\"/usr/lib/libcuda.so.1\\n\\n/usr/bin/nvidia-smi\\n\","
	"\"devices\":[{\"path\":\"/dev/x\",\"host\":\"/dev/full\",\"major\":1,\"minor\":7}]}";

static void test_old_records(void **state)
{
	struct lease *l = decode_text(old_record);

	(void)state;
	assert_int_equal(l->cgid, 12);
	assert_null(l->container);
	assert_int_equal(l->n_gpus, 1);
	assert_int_equal(l->gpus[0].family, DG_VENDOR_NVIDIA);
	assert_false(l->gpus[0].card || l->gpus[0].instance);
	/* Its GPU time counts from the lease's start. */
	assert_int_equal(l->gpus[0].since_ms, 1700000000000);
	assert_int_equal(l->gpus[0].ms, 0);
	assert_int_equal(l->n_spent, 0);
	assert_int_equal(l->expires, 0);
	assert_false(l->kill_on_expiry);
	assert_false(l->has_majors);
	assert_int_equal(l->n_devices, 1);
	assert_string_equal(l->devices[0].name, "x");
	assert_false(l->devices[0].block);
	assert_int_equal(l->devices[0].access, 0);
	assert_int_equal(l->driver_caps, DG_DRV_COMPUTE);
	assert_int_equal(l->n_driver_files, 2);
	assert_string_equal(l->driver_files[0].path, "/usr/lib/libcuda.so.1");
	assert_string_equal(l->driver_files[1].path, "/usr/bin/nvidia-smi");
	/* The process's own root, and every node devgate's (removed at revoke). */
	assert_null(l->root);
	assert_int_equal(l->n_kept, 0);
	assert_false(lease_node_kept(l, "x"));
	lease_free(l);
}

/*
 * What a newer devgated may write: keys this one does not know are
 * skipped, capability bits it does not know dropped; a key that goes with
 * another (kill_on_expiry with expires, caps with gi) is not read alone.
 */
static void test_newer_records(void **state)
{
	struct lease *l = decode_text(
		"{\"format\":1,\"cgroup_id\":\"12\",\"cgroup\":\"/c\",\"container\":\"j\","
		"\"pid\":1,\"since\":0,\"future\":{\"x\":[1]},\"kill_on_expiry\":true,"
		"\"gpus\":[{\"uuid\":\"GPU-1\",\"minor\":1,\"shared\":true,\"caps\":[3],"
		"\"weight\":2}],\"driver_caps\":255,\"driver_files\":[]}");

	(void)state;
	assert_string_equal(l->container, "j");
	assert_true(l->gpus[0].shared);
	assert_false(l->gpus[0].instance);
	assert_int_equal(l->gpus[0].n_caps, 0);
	assert_false(l->kill_on_expiry);
	assert_int_equal(l->driver_caps, DG_DRV_ALL);
	lease_free(l);
}

static void refused(const char *text, const char *why_want)
{
	auto_json json_object *o = json_parse_object(text);
	struct lease *l = NULL;
	char why[256] = "";

	if (!o)
		fail_msg("not JSON: %s", text);
	assert_int_equal(record_decode(o, &l, why, sizeof(why)), -EINVAL);
	assert_null(l);
	assert_string_equal(why, why_want);
}

#define HEAD_NO_PID "{\"format\":1,\"cgroup_id\":\"12\",\"cgroup\":\"/c\",\"container\":null,"
#define HEAD HEAD_NO_PID "\"pid\":1,\"since\":0,"
#define GPU(x) HEAD "\"gpus\":[{\"uuid\":\"GPU-1\",\"shared\":false," x "}]}"
#define DEV(x) HEAD "\"gpus\":[],\"devices\":[{\"minor\":7," x "}]}"

static void test_refused(void **state)
{
	char many[8192];
	int n;

	(void)state;
	refused(HEAD "\"gpus\":null}", "lease record: 'gpus' must be an array of objects");
	refused(HEAD_NO_PID "\"gpus\":[],\"since\":0,\"pid\":4294967296}",
		"lease record: 'pid' is out of range");
	refused(GPU("\"minor\":255"),
		"lease record: gpus[0]: 'minor' is out of range for an NVIDIA GPU (0 to 254)");
	refused(GPU("\"minor\":1,\"vendor\":\"amd\",\"gi\":1,\"caps\":[5]"),
		"lease record: gpus[0]: 'gi' is for an NVIDIA GPU; only those have MIG instances");
	refused(GPU("\"minor\":1,\"gi\":1"), "lease record: gpus[0]: 'caps' is missing");
	refused(GPU("\"minor\":1,\"gi\":1,\"caps\":[]"),
		"lease record: gpus[0]: 'caps' is empty; an instance has at least its own "
		"capability node");
	refused(GPU("\"minor\":1,\"gi\":1,\"caps\":[1,2,3,4,5,6,7,8,9,10]"),
		"lease record: gpus[0]: 'caps' has more than 9 elements");
	refused(GPU("\"minor\":1,\"gi\":1,\"caps\":[1048576]"),
		"lease record: gpus[0].caps[0]: 'caps' is out of range (0 to 1048575)");
	refused(HEAD_NO_PID "\"pid\":1,\"since\":9223372036854776,\"gpus\":[]}",
		"lease record: 'since' is out of range (0 to 9223372036854775)");
	refused(GPU("\"minor\":1,\"since_ms\":-1"),
		"lease record: gpus[0]: 'since_ms' is out of range (0 or more)");
	refused(HEAD "\"gpus\":[{\"uuid\":\"GPU-01234567890123456789012345678901234567890123456789"
		     "012345678901234567890123456789\",\"minor\":1,\"shared\":false}]}",
		"lease record: gpus[0]: 'uuid' is longer than 79 bytes");
	refused(DEV("\"path\":\"/dev/..\",\"major\":1,\"host\":\"/dev/full\""),
		"lease record: devices[0]: 'path' is not /dev/NAME");
	refused(DEV("\"path\":\"/dev/x\",\"major\":1,\"host\":\"full\""),
		"lease record: devices[0]: 'host' is not an absolute path");
	refused(DEV("\"path\":\"/x\",\"major\":1,\"host\":\"/dev/full\""),
		"lease record: devices[0]: 'path' must start with /dev/");
	refused(DEV("\"path\":\"/dev/x\",\"major\":4096,\"host\":\"/dev/full\""),
		"lease record: devices[0]: 'major' is out of range (0 to 4095)");
	refused(DEV("\"path\":\"/dev/x\",\"major\":1,\"access\":8,\"host\":\"/dev/full\""),
		"lease record: devices[0]: 'access' is out of range (0 to 7)");
	refused(HEAD "\"gpus\":[],\"devices\":[{\"path\":\"/dev/a\",\"host\":\"/dev/full\","
		     "\"major\":1,\"minor\":7},{\"path\":\"/dev/b\",\"host\":\"/dev/full\","
		     "\"major\":1,\"minor\":7}]}",
		"lease record: devices[1]: it is listed twice (the same path or the same device)");
	refused(HEAD "\"gpus\":[],\"root\":\"/r\"}", "lease record: 'root_id' is missing");
	refused(HEAD "\"gpus\":[],\"root\":\"r\",\"root_id\":{\"dev\":\"1\",\"ino\":\"2\"}}",
		"lease record: root 'r' is not an absolute path");
	refused(HEAD "\"gpus\":[],\"kept\":[\"/dev/../etc\"]}",
		"lease record: kept[0]: '/dev/../etc' is not /dev/NAME");
	refused(HEAD "\"gpus\":[],\"kept\":[\"null\"]}",
		"lease record: kept[0]: 'null' is not /dev/NAME");
	refused(HEAD "\"gpus\":[],\"spent\":[{\"ms\":1}]}",
		"lease record: spent[0]: 'uuid' is missing");
	refused(HEAD "\"gpus\":[],\"driver_caps\":2,\"driver_files\":[],"
		     "\"driver_dirs\":[{\"path\":\"usr\",\"ino\":\"7\"}]}",
		"lease record: driver_dirs[0]: 'usr' is not an absolute path");
	refused(HEAD "\"gpus\":[],\"driver_caps\":-1,\"driver_files\":[]}",
		"lease record: 'driver_caps' is out of range");
	refused("{\"format\":1,\"cgroup_id\":\"12\",\"cgroup\":null,\"container\":null,\"pid\":1,"
		"\"since\":0,\"gpus\":[]}",
		"lease record: 'cgroup' must be a string");
	n = snprintf(many, sizeof(many), HEAD "\"gpus\":[");
	for (int i = 0; i <= DG_MAX_GPUS; i++)
		n += snprintf(many + n, sizeof(many) - (size_t)n,
			      "%s{\"uuid\":\"GPU-%d\",\"minor\":1,\"shared\":true}", i ? "," : "",
			      i);
	snprintf(many + n, sizeof(many) - (size_t)n, "]}");
	refused(many, "lease record: 'gpus' has more than 64 elements");
}

/* The vendor names of records are those of the rest of devgate. */
static void test_vendor_names(void **state)
{
	(void)state;
	for (int v = 0; v < DG_VENDORS; v++) {
		struct lease *l = record_lease_plain(), *back;
		auto_json json_object *o = NULL;
		json_object *g;

		l->gpus[0].family = (enum dg_vendor)v;
		l->gpus[0].minor = 129;
		o = record_encode(l);
		g = json_object_array_get_idx(json_object_object_get(o, "gpus"), 0);
		if (v != DG_VENDOR_NVIDIA)
			assert_string_equal(
				json_object_get_string(json_object_object_get(g, "vendor")),
				vendor_name((enum dg_vendor)v));
		back = decode_text(json_object_to_json_string(o));
		assert_int_equal(back->gpus[0].family, v);
		lease_free(back);
		lease_free(l);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_field), cmocka_unit_test(test_golden),
		cmocka_unit_test(test_runtime),	    cmocka_unit_test(test_move_journal),
		cmocka_unit_test(test_old_records), cmocka_unit_test(test_newer_records),
		cmocka_unit_test(test_refused),	    cmocka_unit_test(test_vendor_names),
	};

	return cmocka_run_group_tests_name("record", tests, NULL, NULL);
}
