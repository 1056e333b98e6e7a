// SPDX-License-Identifier: Apache-2.0
/* Lease persistence format and labels. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "driver.h"
#include "jsonutil.h"
#include "lease/lease.h"
#include "lease/record.h"
#include "util.h"

static void test_roundtrip(void **state)
{
	struct lease *l = lease_new(18446744073709551557ull), *back = NULL;
	struct dg_gpu g = { .minor = 3 };
	auto_json json_object *o = NULL;
	char why[128] = "";

	(void)state;
	l->cgroup = strdup("/machine.slice/x");
	l->pid = 4242;
	l->since = 1795276298;
	snprintf(g.uuid, sizeof(g.uuid), "GPU-abc");
	assert_int_equal(lease_add_gpu(l, &g, true), 1);
	assert_int_equal(lease_add_gpu(l, &g, true), 0);
	o = record_encode(l);
	assert_int_equal(record_decode(o, &back, why, sizeof(why)), 0);
	assert_true(back->cgid == 18446744073709551557ull);
	assert_string_equal(back->cgroup, "/machine.slice/x");
	assert_null(back->container);
	assert_int_equal(back->pid, 4242);
	assert_int_equal(back->n_gpus, 1);
	assert_int_equal(back->gpus[0].minor, 3);
	assert_true(back->gpus[0].shared);
	lease_free(l);
	lease_free(back);
}

static void test_devices_roundtrip(void **state)
{
	struct lease *l = lease_new(77), *back = NULL;
	struct lease_device full = { .name = "myfull", .host = "/dev/full", .major = 1, .minor = 7 };
	struct lease_device lc = {
		.name = "loop-control", .host = "/dev/loop-control", .major = 10, .minor = 237
	};
	struct lease_device clash = full;
	struct lease_device disk = {
		.name = "disk", .host = "/d", .major = 1, .minor = 7, .block = true
	};
	struct dg_inventory inv = { 0 };
	struct dg_node nodes[DG_MAX_NODES];
	auto_json json_object *o = NULL;
	char why[128] = "";

	(void)state;
	l->cgroup = strdup("/c");
	assert_int_equal(lease_add_device(l, &full), 1);
	assert_int_equal(lease_add_device(l, &full), 0);
	snprintf(clash.name, sizeof(clash.name), "other");
	assert_int_equal(lease_add_device(l, &clash), -EEXIST);
	assert_int_equal(lease_add_device(l, &lc), 1);
	/* Block 1:7 is another device than char 1:7. */
	assert_int_equal(lease_add_device(l, &disk), 1);
	/* A lease with devices only holds something; its nodes are the devices. */
	assert_true(lease_holds(l));
	assert_int_equal(lease_nodes(l, &inv, nodes, DG_MAX_NODES), 3);
	assert_string_equal(nodes[0].name, "myfull");
	assert_false(nodes[0].block);
	assert_int_equal(nodes[1].minor, 237);
	assert_true(nodes[2].block);
	o = record_encode(l);
	assert_int_equal(record_decode(o, &back, why, sizeof(why)), 0);
	assert_int_equal(back->n_gpus, 0);
	assert_int_equal(back->n_devices, 3);
	assert_false(back->devices[0].block);
	assert_true(back->devices[2].block);
	lease_del_device(back, "disk");
	assert_string_equal(back->devices[0].name, "myfull");
	assert_string_equal(back->devices[0].host, "/dev/full");
	assert_int_equal(back->devices[0].major, 1);
	assert_int_equal(back->devices[0].minor, 7);
	assert_string_equal(back->devices[1].name, "loop-control");
	assert_non_null(lease_find_device(back, "/dev/myfull"));
	assert_non_null(lease_find_device(back, "/dev/full"));
	assert_null(lease_find_device(back, "/dev/zero"));
	lease_del_device(back, "myfull");
	assert_int_equal(back->n_devices, 1);
	assert_string_equal(back->devices[0].name, "loop-control");
	lease_del_device(back, "loop-control");
	assert_false(lease_holds(back));
	lease_free(l);
	lease_free(back);
}

static void bad(const char *text, const char *why_want)
{
	auto_json json_object *o = json_parse_object(text);
	struct lease *l = NULL;
	char why[128] = "";

	assert_non_null(o);
	assert_int_equal(record_decode(o, &l, why, sizeof(why)), -EINVAL);
	assert_null(l);
	assert_string_equal(why, why_want);
}

/* An AMD GPU keeps its vendor and card; an NVIDIA one's record has neither field. */
static void test_vendor_roundtrip(void **state)
{
	struct lease *l = lease_new(77), *back = NULL;
	struct dg_gpu amd = {
		.family = DG_VENDOR_AMD, .minor = 129, .has_card = true, .card_minor = 1
	};
	struct dg_gpu nv = { .minor = 2 };
	struct dg_inventory inv = { .majors = { .has_nvidia = true, .nvidia = 195 } };
	struct dg_node nodes[8];
	auto_json json_object *o = NULL;
	json_object *g = NULL, *v = NULL;
	char why[128] = "";

	(void)state;
	l->cgroup = strdup("/c");
	snprintf(amd.uuid, sizeof(amd.uuid), "0000:90:00.0");
	snprintf(nv.uuid, sizeof(nv.uuid), "GPU-1");
	assert_int_equal(lease_add_gpu(l, &amd, false), 1);
	lease_gpu_add_card(l, &amd);
	assert_int_equal(lease_add_gpu(l, &nv, false), 1);
	o = record_encode(l);
	assert_true(json_object_object_get_ex(o, "gpus", &g));
	assert_false(json_object_object_get_ex(json_object_array_get_idx(g, 1), "vendor", &v));
	assert_false(json_object_object_get_ex(json_object_array_get_idx(g, 1), "card", &v));
	assert_int_equal(record_decode(o, &back, why, sizeof(why)), 0);
	assert_int_equal(back->gpus[0].family, DG_VENDOR_AMD);
	assert_true(back->gpus[0].card);
	assert_int_equal(back->gpus[0].card_minor, 1);
	assert_int_equal(back->gpus[1].family, DG_VENDOR_NVIDIA);
	assert_false(back->gpus[1].card);
	/* Nodes: render, card, nvidia2; no control node the inventory lacks. */
	assert_int_equal(lease_nodes(back, &inv, nodes, 8), 3);
	assert_string_equal(nodes[0].name, "dri/renderD129");
	assert_int_equal(nodes[0].major, 226);
	assert_string_equal(nodes[1].name, "dri/card1");
	assert_string_equal(nodes[2].name, "nvidia2");
	lease_free(l);
	lease_free(back);
}

/* A MIG instance: its GI and capability minors in the record, counted apart from the GPU. */
static void test_instance(void **state)
{
	struct lease_table t = { 0 };
	struct lease *a = lease_new(1), *b = lease_new(2), *back = NULL;
	struct dg_gpu nv = { .minor = 0, .mig = true, .n_gi = 2 };
	struct dg_inventory inv = {
		.majors = { .has_nvidia = true, .nvidia = 195, .has_caps = true, .caps = 506 }
	};
	struct dg_node nodes[8];
	auto_json json_object *o = NULL;
	json_object *g = NULL, *v = NULL;
	const struct lease_use *u;
	char why[128] = "";
	uint32_t gi = 0;

	(void)state;
	snprintf(nv.uuid, sizeof(nv.uuid), "GPU-1");
	nv.gi[0] = (struct dg_mig_gi){ .id = 1, .minor = 12, .n_ci = 1, .ci = { { 0, 13 } } };
	nv.gi[1] = (struct dg_mig_gi){ .id = 2, .minor = 21, .n_ci = 1, .ci = { { 0, 22 } } };
	a->cgroup = strdup("/a");
	b->cgroup = strdup("/b");
	assert_int_equal(lease_add_instance(a, &nv, &nv.gi[0]), 1);
	assert_int_equal(lease_add_instance(a, &nv, &nv.gi[0]), 0);
	assert_int_equal(lease_add_instance(b, &nv, &nv.gi[1]), 1);
	o = record_encode(a);
	assert_true(json_object_object_get_ex(o, "gpus", &g));
	assert_true(json_object_object_get_ex(json_object_array_get_idx(g, 0), "gi", &v));
	assert_int_equal(record_decode(o, &back, why, sizeof(why)), 0);
	assert_true(back->gpus[0].instance);
	assert_int_equal(back->gpus[0].gi, 1);
	assert_int_equal(back->gpus[0].n_caps, 2);
	/* The parent's node, its GI's and CI's capability nodes. */
	assert_int_equal(lease_nodes(back, &inv, nodes, 8), 3);
	assert_string_equal(nodes[0].name, "nvidia0");
	assert_string_equal(nodes[1].name, "nvidia-caps/nvidia-cap12");
	assert_int_equal(nodes[1].major, 506);
	assert_string_equal(nodes[2].name, "nvidia-caps/nvidia-cap13");
	/* Counted per instance; the whole GPU's count stays empty. */
	assert_int_equal(lease_table_add(&t, a), 0);
	assert_int_equal(lease_table_add(&t, b), 0);
	assert_null(lease_table_use(&t, "GPU-1"));
	u = lease_table_use_gi(&t, "gpu-1", 1);
	assert_non_null(u);
	assert_int_equal(u->n_exclusive, 1);
	assert_ptr_equal(lease_table_holder(&t, u, false, 0), a);
	assert_ptr_equal(lease_table_instance_holder(&t, "GPU-1", 1, &gi), b);
	assert_int_equal(gi, 2);
	lease_table_del_gpu(&t, b, "GPU-1");
	assert_null(lease_table_instance_holder(&t, "GPU-1", 1, &gi));
	assert_int_equal(lease_table_use_gi(&t, "GPU-1", 2)->n_exclusive, 0);
	/* An old record (no "gi") reads as the whole GPU. */
	json_object_object_del(json_object_array_get_idx(g, 0), "gi");
	json_object_object_del(json_object_array_get_idx(g, 0), "caps");
	lease_free(back);
	assert_int_equal(record_decode(o, &back, why, sizeof(why)), 0);
	assert_false(back->gpus[0].instance);
	lease_free(back);
	lease_table_clear(&t);
}

static void test_rejects(void **state)
{
	(void)state;
	bad("{}", "lease record: 'format' is missing");
	bad("{\"format\":2}", "lease record: 'format' 2 is not supported (only 1)");
	bad("{\"format\":1,\"cgroup_id\":\"0\"}", "lease record: 'cgroup_id' must be at least 1");
	bad("{\"format\":1,\"cgroup_id\":\"12x\"}",
	    "lease record: 'cgroup_id' must be a decimal string");
	bad("{\"format\":1,\"cgroup_id\":\"12\",\"cgroup\":5}",
	    "lease record: 'cgroup' must be a string");
	bad("{\"format\":1,\"cgroup_id\":\"12\",\"cgroup\":\"/c\",\"container\":null,\"pid\":1,"
	    "\"since\":0,\"gpus\":[{\"uuid\":\"GPU-1\",\"minor\":300,\"shared\":false}]}",
	    "lease record: gpus[0]: 'minor' is out of range (0 to 255)");
	bad("{\"format\":1,\"cgroup_id\":\"12\",\"cgroup\":\"/c\",\"container\":null,\"pid\":1,"
	    "\"since\":0,\"gpus\":[{\"uuid\":\"GPU-1\",\"minor\":1}]}",
	    "lease record: gpus[0]: 'shared' is missing");
	bad("{\"format\":1,\"cgroup_id\":\"12\",\"cgroup\":\"/c\",\"container\":null,\"pid\":1,"
	    "\"since\":0,\"gpus\":[{\"uuid\":\"a\",\"vendor\":\"matrox\",\"minor\":1}]}",
	    "lease record: gpus[0]: 'vendor' must be one of nvidia, amd, intel");
	bad("{\"format\":1,\"cgroup_id\":\"12\",\"cgroup\":\"/c\",\"container\":null,\"pid\":1,"
	    "\"since\":0,\"gpus\":[{\"uuid\":\"a\",\"minor\":1,\"card\":0,\"shared\":false}]}",
	    "lease record: gpus[0]: 'card' is for a DRM GPU; an NVIDIA GPU has no card node");
#define HEAD                                                                                 \
	"{\"format\":1,\"cgroup_id\":\"12\",\"cgroup\":\"/c\",\"container\":null,\"pid\":1," \
	"\"since\":0,\"gpus\":[],"
	bad(HEAD "\"devices\":{}}", "lease record: 'devices' must be an array of objects");
	bad(HEAD "\"devices\":[{\"path\":\"/dev/a/b\",\"host\":\"/dev/full\",\"type\":\"c\","
		 "\"major\":1,\"minor\":7}]}",
	    "lease record: devices[0]: 'path' is not /dev/NAME");
	bad(HEAD "\"devices\":[{\"path\":\"/dev/x\",\"host\":\"/dev/full\",\"type\":\"p\","
		 "\"major\":1,\"minor\":7}]}",
	    "lease record: devices[0]: 'type' must be one of c, b");
	bad(HEAD "\"devices\":[{\"path\":\"/dev/x\",\"host\":\"/dev/full\",\"type\":\"c\","
		 "\"major\":1}]}",
	    "lease record: devices[0]: 'minor' is missing");
#undef HEAD
}

/* grant --driver's files: an array in the record; a record with the old string reads the same. */
static void test_driver_files(void **state)
{
	struct lease *l = lease_new(78), *back = NULL, *old = NULL;
	struct lease_file files[] = { { "/usr/lib/libcuda.so.550.54.14" },
				      { "/usr/bin/nvidia-smi" } };
	auto_json json_object *o = NULL, *legacy = NULL;
	json_object *arr;
	char why[160] = "";

	(void)state;
	l->cgroup = strdup("/c");
	l->driver_caps = DG_DRV_COMPUTE | DG_DRV_UTILITY;
	l->driver_files = malloc(sizeof(files));
	memcpy(l->driver_files, files, sizeof(files));
	l->n_driver_files = 2;
	o = record_encode(l);
	assert_true(json_object_object_get_ex(o, "driver_files", &arr));
	assert_true(json_object_is_type(arr, json_type_array));
	assert_int_equal(json_object_array_length(arr), 2);
	assert_int_equal(record_decode(o, &back, why, sizeof(why)), 0);
	assert_int_equal(back->driver_caps, DG_DRV_COMPUTE | DG_DRV_UTILITY);
	assert_int_equal(back->n_driver_files, 2);
	assert_string_equal(back->driver_files[0].path, "/usr/lib/libcuda.so.550.54.14");
	assert_string_equal(back->driver_files[1].path, "/usr/bin/nvidia-smi");

	legacy = json_parse_object(
		"{\"format\":1,\"cgroup_id\":\"12\",\"cgroup\":\"/c\",\"container\":null,"
		"\"pid\":1,\"since\":0,\"gpus\":[],\"driver_caps\":2,"
		"\"driver_files\":\"/usr/lib/libcuda.so.1\\n/usr/bin/nvidia-smi\\n\"}");
	assert_non_null(legacy);
	assert_int_equal(record_decode(legacy, &old, why, sizeof(why)), 0);
	assert_int_equal(old->n_driver_files, 2);
	assert_string_equal(old->driver_files[0].path, "/usr/lib/libcuda.so.1");
	assert_string_equal(old->driver_files[1].path, "/usr/bin/nvidia-smi");
	lease_free(old);
	old = lease_copy(back);
	assert_int_equal(old->n_driver_files, 2);
	assert_string_equal(old->driver_files[1].path, "/usr/bin/nvidia-smi");
	lease_driver_clear(old);
	assert_int_equal(old->n_driver_files, 0);
	lease_free(old);
	lease_free(l);
	lease_free(back);
#define HEAD                                                                                 \
	"{\"format\":1,\"cgroup_id\":\"12\",\"cgroup\":\"/c\",\"container\":null,\"pid\":1," \
	"\"since\":0,\"gpus\":[],\"driver_caps\":2,"
	bad(HEAD "\"x\":1}", "lease record: 'driver_files' is missing");
	bad(HEAD "\"driver_files\":7}", "lease record: 'driver_files' must be an array of strings");
	bad(HEAD "\"driver_files\":[7]}", "lease record: driver_files[0]: must be a string");
	bad(HEAD "\"driver_files\":[\"lib/x\"]}",
	    "lease record: driver_files[0]: 'lib/x' is not an absolute path");
	bad(HEAD "\"driver_files\":\"/a\\nrel\\n\"}",
	    "lease record: driver_files[1]: 'rel' is not an absolute path");
#undef HEAD
}

static void label(const char *cgroup, const char *want)
{
	auto_free char *got = lease_label_from_cgroup(cgroup);

	if (want)
		assert_string_equal(got, want);
	else
		assert_null(got);
}

static void test_labels(void **state)
{
	(void)state;
	label("/c1", "c1");
	label("/system.slice/docker-3f2a5c.scope", "3f2a5c");
	label("/machine.slice/libpod-abc.scope", "abc");
	label("/kubepods/pod1/cri-containerd-ff00", "ff00");
	label("/libpod_parent/libpod-1234", "1234");
	label("/docker-", "docker-");
	label("/", NULL);
}

static void test_table_ids(void **state)
{
	struct lease_table t = { 0 };
	uint64_t *ids;

	(void)state;
	ids = lease_table_ids(&t); /* empty: still an array to free */
	assert_non_null(ids);
	free(ids);
	for (uint64_t id = 7; id <= 9; id++)
		assert_int_equal(lease_table_add(&t, lease_new(id)), 0);
	ids = lease_table_ids(&t);
	assert_non_null(ids);
	for (size_t i = 0; i < t.n; i++)
		assert_int_equal(ids[i], t.v[i]->cgid);
	assert_int_equal(ids[0] + ids[1] + ids[2], 7 + 8 + 9);
	free(ids);
	lease_table_clear(&t);
}

/* The index against a plain model: many adds, takes in a scattered order, finds. */
static void test_table_index(void **state)
{
	struct lease_table t = { 0 };
	enum {
		N = 3000
	};
	static bool present[N + 1];
	size_t live = 0;

	(void)state;
	for (uint64_t id = 1; id <= N; id++) {
		/* Ids that collide in the low bits, like cgroup ids close together. */
		assert_int_equal(lease_table_add(&t, lease_new(id * 64)), 0);
		present[id] = true;
		live++;
	}
	for (uint64_t k = 0; k < 2 * N; k++) {
		uint64_t id = (k * 7919) % N + 1;
		struct lease *l = lease_table_take(&t, id * 64);

		if (present[id]) {
			assert_non_null(l);
			assert_int_equal(l->cgid, id * 64);
			lease_free(l);
			present[id] = false;
			live--;
		} else {
			assert_null(l);
		}
		if (k % 3 == 0) { /* and some come back */
			assert_int_equal(lease_table_add(&t, lease_new(id * 64)), 0);
			present[id] = true;
			live++;
		}
	}
	assert_int_equal(t.n, live);
	for (uint64_t id = 1; id <= N; id++) {
		struct lease *l = lease_table_find(&t, id * 64);

		if (present[id])
			assert_true(l && l->cgid == id * 64);
		else
			assert_null(l);
	}
	assert_null(lease_table_find(&t, 12345));
	lease_table_clear(&t);
}

/* The use counts against a walk of the table, after each change. */
static void check_use(const struct lease_table *t, const struct dg_gpu *gpus, size_t n_gpus)
{
	for (size_t k = 0; k < n_gpus; k++) {
		const struct lease_use *u = lease_table_use(t, gpus[k].uuid);
		uint32_t ex = 0, sh = 0;

		for (size_t i = 0; i < t->n; i++) {
			const struct lease_gpu *g = lease_find_gpu(t->v[i], gpus[k].uuid);

			ex += g && !g->shared;
			sh += g && g->shared;
		}
		assert_int_equal(u ? u->n_exclusive : 0, ex);
		assert_int_equal(u ? u->n_shared : 0, sh);
		if (!u)
			continue;
		for (int shared = 0; shared < 2; shared++) {
			const struct lease *h = lease_table_holder(t, u, shared, 0);
			const struct lease_gpu *g = h ? lease_find_gpu(h, gpus[k].uuid) : NULL;

			assert_int_equal(h != NULL, (shared ? sh : ex) > 0);
			assert_true(!h || (lease_table_find(t, h->cgid) == h && g &&
					   g->shared == (bool)shared));
		}
	}
}

static void test_table_use(void **state)
{
	struct lease_table t = { 0 };
	struct dg_gpu gpus[3] = { 0 };

	(void)state;
	for (unsigned int i = 0; i < 3; i++) {
		gpus[i].minor = i;
		snprintf(gpus[i].uuid, sizeof(gpus[i].uuid), "GPU-%u", i);
	}
	for (uint64_t k = 1; k <= 600; k++) {
		uint64_t id = (k * 37) % 50 + 1;
		struct lease *l = lease_table_take(&t, id);

		if (!l)
			l = lease_new(id);
		if (k % 5 == 0) { /* a lease leaves */
			lease_free(l);
		} else {
			/* A GPU by the lowercase name: UUIDs match case-insensitively. */
			(void)lease_add_gpu(l, &gpus[k % 3], k % 2);
			assert_int_equal(lease_table_add(&t, l), 0);
			if (k % 7 == 0)
				lease_table_del_gpu(&t, l, "gpu-1");
		}
		check_use(&t, gpus, 3);
		/* The holder named never is the one skipped. */
		for (size_t g = 0; g < 3 && l && k % 5; g++) {
			const struct lease_use *u = lease_table_use(&t, gpus[g].uuid);
			const struct lease *h = u ? lease_table_holder(&t, u, true, id) : NULL;

			assert_true(!h || h->cgid != id);
		}
	}
	lease_table_clear(&t);
}

static void test_expiry_record(void **state)
{
	struct lease *l = lease_new(12), *back = NULL, *c;
	auto_json json_object *o = NULL, *o2 = NULL;
	char why[128] = "";

	(void)state;
	l->cgroup = strdup("/c");
	/* Without a ttl the record has no expiry keys at all. */
	o = record_encode(l);
	assert_false(json_object_object_get_ex(o, "expires", NULL));
	assert_false(json_object_object_get_ex(o, "kill_on_expiry", NULL));
	l->expires = 1795276300;
	l->kill_on_expiry = true;
	c = lease_copy(l);
	assert_int_equal(c->expires, 1795276300);
	assert_true(c->kill_on_expiry);
	lease_free(c);
	o2 = record_encode(l);
	assert_int_equal(record_decode(o2, &back, why, sizeof(why)), 0);
	assert_int_equal(back->expires, 1795276300);
	assert_true(back->kill_on_expiry);
	lease_free(back);
	back = NULL;
	assert_int_equal(record_decode(o, &back, why, sizeof(why)), 0);
	assert_int_equal(back->expires, 0);
	assert_false(back->kill_on_expiry);
	lease_free(back);
	lease_free(l);
#define HEAD                                                                                 \
	"{\"format\":1,\"cgroup_id\":\"12\",\"cgroup\":\"/c\",\"container\":null,\"pid\":1," \
	"\"since\":0,\"gpus\":[],"
	bad(HEAD "\"expires\":0,\"kill_on_expiry\":false}",
	    "lease record: 'expires' is out of range (1 or more)");
	bad(HEAD "\"expires\":-5,\"kill_on_expiry\":false}",
	    "lease record: 'expires' is out of range (1 or more)");
	bad(HEAD "\"expires\":\"soon\",\"kill_on_expiry\":false}",
	    "lease record: 'expires' must be an integer");
	bad(HEAD "\"expires\":100}", "lease record: 'kill_on_expiry' is missing");
#undef HEAD
}

/* The majors a lease's nodes were made with: only the driver's, and none in older records. */
static void test_majors_record(void **state)
{
	struct lease *l = lease_new(12), *back = NULL, *c;
	auto_json json_object *o = NULL, *o2 = NULL;
	char why[128] = "";

	(void)state;
	l->cgroup = strdup("/c");
	o = record_encode(l);
	assert_false(json_object_object_get_ex(o, "majors", NULL));
	assert_int_equal(record_decode(o, &back, why, sizeof(why)), 0);
	assert_false(back->has_majors);
	lease_free(back);
	back = NULL;
	l->has_majors = true;
	l->majors = (struct dg_majors){
		.has_nvidia = true, .nvidia = 195, .has_uvm = true, .uvm = 507, .caps = 9
	};
	c = lease_copy(l);
	assert_true(c->has_majors);
	assert_int_equal(c->majors.uvm, 507);
	lease_free(c);
	o2 = record_encode(l);
	assert_string_equal(json_object_to_json_string(json_object_object_get(o2, "majors")),
			    "{ \"nvidia\": 195, \"nvidia-uvm\": 507 }");
	assert_int_equal(record_decode(o2, &back, why, sizeof(why)), 0);
	assert_true(back->has_majors && back->majors.has_nvidia && back->majors.has_uvm);
	assert_false(back->majors.has_caps || back->majors.has_kfd);
	assert_int_equal(back->majors.nvidia, 195);
	assert_int_equal(back->majors.uvm, 507);
	lease_free(back);
	lease_free(l);
#define HEAD                                                                                 \
	"{\"format\":1,\"cgroup_id\":\"12\",\"cgroup\":\"/c\",\"container\":null,\"pid\":1," \
	"\"since\":0,\"gpus\":[],"
	bad(HEAD "\"majors\":[195]}", "lease record: 'majors' must be an object");
	bad(HEAD "\"majors\":{\"nvidia-uvm\":5000}}",
	    "lease record: majors: 'nvidia-uvm' is out of range (1 to 4095)");
#undef HEAD
}

static void test_expiry_arithmetic(void **state)
{
	const int64_t now = 1795276298;
	struct lease l = { .expires = 0 };
	int64_t e = -1;

	(void)state;
	assert_int_equal(lease_expiry_new(now, 90, &e), 0);
	assert_int_equal(e, now + 90);
	assert_int_equal(lease_expiry_new(now, DURATION_MAX_S, &e), 0);
	assert_int_equal(e, now + DURATION_MAX_S);
	e = -1;
	assert_int_equal(lease_expiry_new(now, 0, &e), -ERANGE);
	assert_int_equal(lease_expiry_new(now, -1, &e), -ERANGE);
	assert_int_equal(lease_expiry_new(now, DURATION_MAX_S + 1, &e), -ERANGE);
	assert_int_equal(e, -1);

	/* by is added to the expiry ... */
	assert_int_equal(lease_expiry_extend(now + 10, now, 60, &e), 0);
	assert_int_equal(e, now + 70);
	/* ... or to now once it passed (the timer has not run yet) */
	assert_int_equal(lease_expiry_extend(now - 5, now, 60, &e), 0);
	assert_int_equal(e, now + 60);
	/* up to DURATION_MAX_S from now, not past it */
	assert_int_equal(lease_expiry_extend(now + 10, now, DURATION_MAX_S - 10, &e), 0);
	assert_int_equal(e, now + DURATION_MAX_S);
	e = -1;
	assert_int_equal(lease_expiry_extend(now + 10, now, DURATION_MAX_S - 9, &e), -ERANGE);
	assert_int_equal(lease_expiry_extend(now + DURATION_MAX_S, now, 1, &e), -ERANGE);
	assert_int_equal(lease_expiry_extend(now + 10, now, INT64_MAX, &e), -ERANGE);
	assert_int_equal(lease_expiry_extend(now + 10, now, 0, &e), -ERANGE);
	/* a lease without an expiry is not extended */
	assert_int_equal(lease_expiry_extend(0, now, 60, &e), -ENOENT);
	assert_int_equal(e, -1);

	assert_int_equal(lease_expiry_left(&l, now), -1);
	l.expires = now + 42;
	assert_int_equal(lease_expiry_left(&l, now), 42);
	l.expires = now;
	assert_int_equal(lease_expiry_left(&l, now), 0);
	l.expires = now - 3;
	assert_int_equal(lease_expiry_left(&l, now), 0);
}

static void test_table_next_expiry(void **state)
{
	struct lease_table t = { 0 };
	const int64_t exp[] = { 0, 500, 0, 300, 900 };

	(void)state;
	assert_int_equal(lease_table_next_expiry(&t), 0);
	for (size_t i = 0; i < ARRAY_SIZE(exp); i++) {
		struct lease *l = lease_new(100 + i);

		assert_non_null(l);
		l->cgroup = strdup("/c");
		l->expires = exp[i];
		assert_int_equal(lease_table_add(&t, l), 0);
	}
	assert_int_equal(lease_table_next_expiry(&t), 300);
	lease_free(lease_table_take(&t, 103));
	assert_int_equal(lease_table_next_expiry(&t), 500);
	lease_free(lease_table_take(&t, 101));
	lease_free(lease_table_take(&t, 104));
	assert_int_equal(lease_table_next_expiry(&t), 0);
	lease_table_clear(&t);
}

/* The nodes a lease keeps: set from a grant's findings, asked by name, copied, cleared. */
static void test_kept_nodes(void **state)
{
	static const struct dg_node nodes[] = {
		{ .name = "null", .major = 1, .minor = 3 },
		{ .name = "nvidia0", .major = 195, .minor = 0 },
		{ .name = "dri/renderD128", .major = 226, .minor = 128 },
	};
	const bool keep[] = { true, false, true }, none[] = { false, false, false };
	struct lease *l = lease_new(7), *copy;

	(void)state;
	assert_false(lease_node_kept(l, "null"));
	assert_int_equal(lease_keep_nodes(l, nodes, keep, 3), 1);
	assert_int_equal(lease_keep_nodes(l, nodes, keep, 3), 0);
	assert_true(lease_node_kept(l, "null") && lease_node_kept(l, "dri/renderD128"));
	assert_false(lease_node_kept(l, "nvidia0") || lease_node_kept(l, "renderD128"));
	assert_string_equal(l->kept[1].path, "/dev/dri/renderD128");
	assert_int_equal(lease_set_root(l, "/run/b/rootfs", 5, 6), 0);
	copy = lease_copy(l);
	assert_non_null(copy);
	assert_true(lease_node_kept(copy, "null") && copy->n_kept == 2);
	assert_string_equal(copy->root, "/run/b/rootfs");
	assert_true(copy->root_dev == 5 && copy->root_ino == 6);
	assert_int_equal(lease_keep_nodes(l, nodes, none, 3), 1);
	assert_int_equal(l->n_kept, 0);
	assert_null(l->kept);
	assert_int_equal(lease_set_root(l, NULL, 5, 6), 0);
	assert_null(l->root);
	assert_true(l->root_dev == 0 && l->root_ino == 0);
	lease_free(l);
	lease_free(copy);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip),	  cmocka_unit_test(test_devices_roundtrip),
		cmocka_unit_test(test_vendor_roundtrip),  cmocka_unit_test(test_instance),
		cmocka_unit_test(test_rejects),		  cmocka_unit_test(test_labels),
		cmocka_unit_test(test_table_ids),	  cmocka_unit_test(test_table_index),
		cmocka_unit_test(test_table_use),	  cmocka_unit_test(test_expiry_record),
		cmocka_unit_test(test_majors_record),	  cmocka_unit_test(test_expiry_arithmetic),
		cmocka_unit_test(test_table_next_expiry), cmocka_unit_test(test_driver_files),
		cmocka_unit_test(test_kept_nodes),
	};

	return cmocka_run_group_tests_name("lease", tests, NULL, NULL);
}
