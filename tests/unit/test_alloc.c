// SPDX-License-Identifier: Apache-2.0
/* GPU allocation: selectors, counted requests with constraints, sharing. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lease/alloc.h"
#include "gpu_arch.h"

/* GPUs 0-3: H100, A100, H100, L4 (by PCI id). */
static struct dg_gpu gpus[4];
static struct dg_inventory inv = { .gpus = gpus, .n_gpus = 4 };
static struct lease_table table;

static void set_gpu(unsigned int i, const char *model, uint16_t device)
{
	struct dg_gpu *g = &gpus[i];

	memset(g, 0, sizeof(*g));
	g->index = i;
	g->minor = i;
	g->vendor = 0x10de;
	g->device = device;
	snprintf(g->model, sizeof(g->model), "%s", model);
	snprintf(g->uuid, sizeof(g->uuid), "GPU-%08x-0000-0000-0000-000000000000", 0xa0 + i);
	g->arch = gpu_kind(g->vendor, g->device, g->model).arch;
	g->cc = gpu_kind(g->vendor, g->device, g->model).cc;
	g->memory_mib = gpu_memory_from_model(g->model);
}

static int setup(void **state)
{
	(void)state;
	set_gpu(0, "NVIDIA H100 80GB HBM3", 0x2330);
	set_gpu(1, "NVIDIA A100-SXM4-40GB", 0x20b0);
	set_gpu(2, "NVIDIA H100 80GB HBM3", 0x2330);
	set_gpu(3, "NVIDIA L4", 0x27b8);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	lease_table_clear(&table);
	return 0;
}

/* As devgated does: a lease changes out of the table, which counts its GPUs. */
static struct lease *hold(uint64_t cgid, const char *label, unsigned int gpu, bool shared)
{
	struct lease *l = lease_table_take(&table, cgid);

	if (!l) {
		l = lease_new(cgid);
		l->cgroup = strdup("/c");
		l->container = strdup(label);
	}
	assert_int_equal(lease_add_gpu(l, &gpus[gpu], shared), 1);
	assert_int_equal(lease_table_add(&table, l), 0);
	return l;
}

/* The reason of the last counted pick. */
static char why[512];

/* Runs a request for cgid; returns the picked GPUs as "0110"-style text. */
static int pick(uint64_t cgid, const struct alloc_request *req, char *out, struct dg_error *err)
{
	struct gpu_use use[4];
	bool picked[4];
	int r;

	alloc_usage(&inv, &table, cgid, use);
	r = alloc_pick_why(&inv, use, lease_table_find(&table, cgid), req, picked, why, sizeof(why),
			   err);
	for (int i = 0; i < 4; i++)
		out[i] = picked[i] ? '1' : '0';
	out[4] = '\0';
	return r;
}

static void test_selectors(void **state)
{
	struct alloc_request req = { .selectors = "0,3" };
	struct dg_error err = { 0 };
	char got[5];

	(void)state;
	assert_int_equal(pick(1, &req, got, &err), 0);
	assert_string_equal(got, "1001");
}

static void test_exclusive_conflict(void **state)
{
	struct alloc_request req = { .selectors = "1" };
	struct dg_error err = { 0 };
	char got[5];

	(void)state;
	hold(7, "3f2a5c7d1e0b9a8f3f2a5c7d1e0b9a8f", 1, false);
	assert_int_equal(pick(1, &req, got, &err), -EBUSY);
	assert_int_equal(err.code, DG_E_UNAVAILABLE);
	assert_string_equal(err.message, "GPU 1 held by container 3f2a5c7d1e0b…");
	assert_string_equal(got, "0000");
	/* all-or-nothing: 0 is free, 1 is not */
	req.selectors = "0,1";
	assert_int_equal(pick(1, &req, got, &err), -EBUSY);
	assert_string_equal(got, "0000");
	/* The holder itself asking again is a no-op, not a conflict. */
	assert_int_equal(pick(7, &req, got, &err), 0);
	assert_string_equal(got, "1000");
}

static void test_shared(void **state)
{
	struct alloc_request ex = { .selectors = "2" }, sh = { .selectors = "2", .shared = true };
	struct dg_error err = { 0 };
	char got[5];

	(void)state;
	hold(8, "a", 2, true);
	assert_int_equal(pick(9, &sh, got, &err), 0);
	assert_string_equal(got, "0010");
	hold(9, "b", 2, true);
	/* Exclusive never lands on a shared GPU (named: its first sharer) ... */
	assert_int_equal(pick(1, &ex, got, &err), -EBUSY);
	assert_string_equal(err.message, "GPU 2 shared by container a and others");
	/* ... and shared never on an exclusive one. */
	hold(7, "x", 1, false);
	sh.selectors = "1";
	assert_int_equal(pick(1, &sh, got, &err), -EBUSY);
	/* A holder cannot switch mode in place. */
	assert_int_equal(pick(8, &ex, got, &err), -EBUSY);
	assert_non_null(strstr(err.message, "already holds GPU 2 shared"));
}

static void test_counted(void **state)
{
	struct alloc_request req = { .count = 2, .arch = "hopper" };
	struct dg_error err = { 0 };
	char got[5];

	(void)state;
	/* Lowest free indices that match: GPUs 0 and 2 are the hoppers. */
	assert_int_equal(pick(1, &req, got, &err), 0);
	assert_string_equal(got, "1010");
	req = (struct alloc_request){ .count = 1, .product = "10de:27b8" };
	assert_int_equal(pick(1, &req, got, &err), 0);
	assert_string_equal(got, "0001");
	req = (struct alloc_request){ .count = 2, .model = "h100" };
	assert_int_equal(pick(1, &req, got, &err), 0);
	assert_string_equal(got, "1010");
}

/* --min-memory and --min-cc: a GPU whose value is not known never meets one. */
static void test_minimums(void **state)
{
	struct alloc_request req = { .count = 1, .min_memory = "48G" };
	struct dg_error err = { 0 };
	char got[5];

	(void)state;
	assert_int_equal(pick(1, &req, got, &err), 0);
	assert_string_equal(got, "1000");
	req = (struct alloc_request){ .count = 3, .min_memory = "40GiB" };
	assert_int_equal(pick(1, &req, got, &err), 0);
	assert_string_equal(got, "1110");
	/* The L4's model names no size: it is never picked by memory. */
	req = (struct alloc_request){ .count = 4, .min_memory = "1G" };
	assert_int_equal(pick(1, &req, got, &err), -EBUSY);
	req = (struct alloc_request){ .count = 2, .min_cc = "9.0" };
	assert_int_equal(pick(1, &req, got, &err), 0);
	assert_string_equal(got, "1010");
	req = (struct alloc_request){ .count = 1, .min_cc = "9.0", .arch = "ADA" };
	assert_int_equal(pick(1, &req, got, &err), -ENODEV);
	req = (struct alloc_request){ .count = 1, .arch = "Ada-Lovelace" };
	assert_int_equal(pick(1, &req, got, &err), 0);
	assert_string_equal(got, "0001");
	req = (struct alloc_request){ .count = 1, .min_cc = "12.0" };
	assert_int_equal(pick(1, &req, got, &err), -ENODEV);
	assert_non_null(strstr(err.message, "min-cc=12.0"));
	req = (struct alloc_request){ .count = 1, .min_memory = "forty" };
	assert_int_equal(pick(1, &req, got, &err), -EINVAL);
	assert_non_null(strstr(err.hint, "40G"));
	req = (struct alloc_request){ .count = 1, .min_cc = "8" };
	assert_int_equal(pick(1, &req, got, &err), 0);
	req = (struct alloc_request){ .selectors = "0", .min_cc = "8.0" };
	assert_int_equal(pick(1, &req, got, &err), -EINVAL);
}

/* Outside gpu-allow: never granted, by selector or by count, and said why. */
static void test_excluded(void **state)
{
	struct alloc_request req = { .selectors = "1" };
	struct dg_error err = { 0 };
	char got[5];

	(void)state;
	gpus[1].excluded = true;
	assert_int_equal(pick(1, &req, got, &err), -EBUSY);
	assert_non_null(strstr(err.message, "excluded by the admin's gpu-allow list"));
	assert_non_null(strstr(err.hint, "gpu-allow"));
	req = (struct alloc_request){ .count = 1, .arch = "ampere" };
	assert_int_equal(pick(1, &req, got, &err), -EBUSY);
	assert_non_null(strstr(err.message, "excluded"));
	req = (struct alloc_request){ .count = 3 };
	assert_int_equal(pick(1, &req, got, &err), 0);
	assert_string_equal(got, "1011");
	/* "all" is every GPU devgate may grant; a vanished one is not on the host. */
	req = (struct alloc_request){ .selectors = "all" };
	assert_int_equal(pick(1, &req, got, &err), 0);
	assert_string_equal(got, "1011");
	gpus[3].gone = true;
	assert_int_equal(pick(1, &req, got, &err), 0);
	assert_string_equal(got, "1010");
	gpus[3].gone = false;
	gpus[1].excluded = false;
}

static void test_counted_busy(void **state)
{
	struct alloc_request req = { .count = 2, .arch = "hopper" };
	struct dg_error err = { 0 };
	char got[5];

	(void)state;
	hold(7, "3f2a5c7d1e0b9a8f3f2a5c7d1e0b9a8f", 2, false);
	assert_int_equal(pick(1, &req, got, &err), -EBUSY);
	assert_string_equal(err.message, "requested 2 GPUs with arch=hopper: 1 free "
					 "(GPU 2 held by container 3f2a5c7d1e0b…)");
	assert_string_equal(got, "0000");
	/* A container already holding one matching GPU needs only one more. */
	hold(1, "self", 0, false);
	assert_int_equal(pick(1, &req, got, &err), -EBUSY);
	req.count = 1;
	assert_int_equal(pick(1, &req, got, &err), 0);
	assert_string_equal(got, "0000");
}

static void test_counted_no_match(void **state)
{
	struct alloc_request req = { .count = 1, .arch = "volta" };
	struct dg_error err = { 0 };
	char got[5];

	(void)state;
	assert_int_equal(pick(1, &req, got, &err), -ENODEV);
	assert_int_equal(err.code, DG_E_NO_GPU);
	assert_string_equal(err.message, "no GPU on this host matches arch=volta");
}

static void test_unusable_gpu_skipped(void **state)
{
	struct alloc_request req = { .count = 1, .arch = "hopper" };
	struct dg_error err = { 0 };
	char got[5];

	(void)state;
	snprintf(gpus[0].problem, sizeof(gpus[0].problem), "host node broken");
	assert_int_equal(pick(1, &req, got, &err), 0);
	assert_string_equal(got, "0010");
	req = (struct alloc_request){ .selectors = "0" };
	assert_int_equal(pick(1, &req, got, &err), -EBUSY);
	assert_string_equal(err.message, "GPU 0 unusable: host node broken");
	gpus[0].problem[0] = '\0';
}

static void check_bad(const struct alloc_request *req, const char *msg)
{
	struct dg_error err = { 0 };

	assert_int_equal(alloc_check_request(req, &err), -EINVAL);
	assert_int_equal(err.code, DG_E_INVALID);
	assert_string_equal(err.message, msg);
}

static void test_bad_requests(void **state)
{
	(void)state;
	check_bad(&(struct alloc_request){ .selectors = "0", .count = 1 },
		  "give either GPU selectors or a count with constraints, not both");
	check_bad(&(struct alloc_request){ 0 },
		  "no GPU requested: give selectors or a count of at least 1");
	check_bad(&(struct alloc_request){ .count = 1, .arch = "fermi2" },
		  "unknown architecture 'fermi2'");
	check_bad(&(struct alloc_request){ .count = 1, .product = "10de2330" },
		  "product '10de2330' is not VENDOR:DEVICE in hex, e.g. 10de:2330");
	check_bad(&(struct alloc_request){ .count = 1, .product = "10de:23g0" },
		  "product '10de:23g0' is not VENDOR:DEVICE in hex, e.g. 10de:2330");
	check_bad(&(struct alloc_request){ .count = 65 },
		  "a count of 65 GPUs is more than devgate manages (64)");
	check_bad(&(struct alloc_request){ .selectors = "0,1", .same_numa = true },
		  "--same-numa goes with a count of GPUs, not with GPU selectors");
}

/* NUMA node of each GPU, -1: not known. */
static void set_numa(int a, int b, int c, int d)
{
	int n[4] = { a, b, c, d };

	for (int i = 0; i < 4; i++) {
		gpus[i].numa_known = n[i] >= 0;
		gpus[i].numa_node = n[i];
	}
}

static void expect_pick(const struct alloc_request *req, const char *want, const char *reason)
{
	struct dg_error err = { 0 };
	char got[5];

	why[0] = '\0';
	assert_int_equal(pick(1, req, got, &err), 0);
	assert_string_equal(got, want);
	if (!strstr(why, reason))
		fail_msg("reason '%s' lacks '%s'", why, reason);
}

static void test_numa_one_node(void **state)
{
	(void)state;
	set_numa(0, 0, 1, 1);
	expect_pick(&(struct alloc_request){ .count = 2 }, "1100",
		    "picked GPU 0,1: on NUMA node 0, the node with the most free GPUs");
	/* One of node 0 taken: node 1's pair, not a split. */
	hold(7, "other", 0, false);
	expect_pick(&(struct alloc_request){ .count = 2 }, "0011",
		    "picked GPU 2,3: on NUMA node 1, the node with the most free GPUs");
	/* One GPU goes where most are free: node 1. */
	expect_pick(&(struct alloc_request){ .count = 1 }, "0010", "on NUMA node 1");
}

static void test_numa_cpus(void **state)
{
	struct alloc_cpus on1 = { .node = 1, .where = "the container's CPUs (1) are on node 1" };
	struct alloc_cpus span = { .node = -1, .where = "the container's CPUs (0-1) span" };

	(void)state;
	set_numa(0, 0, 1, 1);
	expect_pick(&(struct alloc_request){ .count = 2, .cpus = &on1 }, "0011",
		    "picked GPU 2,3: on NUMA node 1; the container's CPUs (1) are on node 1");
	expect_pick(&(struct alloc_request){ .count = 2, .cpus = &span }, "1100",
		    "on NUMA node 0, the node with the most free GPUs; the container's CPUs (0-1)");
	/* Its node lacks room: another whole node beats a split. */
	hold(7, "other", 3, false);
	expect_pick(&(struct alloc_request){ .count = 2, .cpus = &on1 }, "1100",
		    "on NUMA node 0, the node with the most free GPUs");
}

static void test_numa_spread(void **state)
{
	(void)state;
	set_numa(0, 1, 1, 2);
	expect_pick(&(struct alloc_request){ .count = 2 }, "0110", "on NUMA node 1");
	/* Node 1's two, then the lower of two single nodes. */
	expect_pick(&(struct alloc_request){ .count = 3 }, "1110",
		    "no NUMA node has 3 free, spread over the fewest");
	set_numa(1, 0, 0, 0);
	expect_pick(&(struct alloc_request){ .count = 3 }, "0111", "on NUMA node 0");
	/* A GPU of no known node comes last. */
	set_numa(-1, 0, 1, 1);
	expect_pick(&(struct alloc_request){ .count = 2 }, "0011", "on NUMA node 1");
	expect_pick(&(struct alloc_request){ .count = 4 }, "1111", "spread");
}

static void test_numa_unknown(void **state)
{
	(void)state;
	set_numa(-1, -1, -1, -1);
	expect_pick(&(struct alloc_request){ .count = 2 }, "1100",
		    "picked GPU 0,1: NUMA nodes not known, lowest free indices");
}

static void test_numa_joins_held(void **state)
{
	(void)state;
	set_numa(0, 0, 1, 1);
	hold(1, "self", 2, false);
	expect_pick(&(struct alloc_request){ .count = 2 }, "0001",
		    "picked GPU 3: on NUMA node 1, with the container's other GPUs");
	expect_pick(&(struct alloc_request){ .count = 2, .same_numa = true }, "0001", "node 1");
}

static void expect_refused(const struct alloc_request *req, int r, enum dg_code code,
			   const char *msg)
{
	struct dg_error err = { 0 };
	char got[5];

	assert_int_equal(pick(1, req, got, &err), r);
	assert_int_equal(err.code, code);
	assert_string_equal(got, "0000");
	if (!strstr(err.message, msg))
		fail_msg("message '%s' lacks '%s'", err.message, msg);
	assert_true(err.hint[0]);
}

static void test_same_numa(void **state)
{
	(void)state;
	set_numa(0, 0, 1, 1);
	hold(7, "other", 0, false);
	hold(8, "another", 2, false);
	expect_refused(&(struct alloc_request){ .count = 2, .same_numa = true }, -EBUSY,
		       DG_E_UNAVAILABLE,
		       "no NUMA node has 2 free GPUs that match (node 0: 1 free of 2, "
		       "node 1: 1 free of 2)");
	expect_pick(&(struct alloc_request){ .count = 2 }, "0101", "spread");
	expect_refused(&(struct alloc_request){ .count = 3, .same_numa = true }, -ENODEV,
		       DG_E_NO_GPU,
		       "no NUMA node has 3 GPUs that match, so this request can never");
	set_numa(-1, -1, -1, -1);
	expect_refused(&(struct alloc_request){ .count = 1, .same_numa = true }, -ENODEV,
		       DG_E_NO_GPU, "(no GPU says its NUMA node)");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_selectors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_exclusive_conflict, setup, teardown),
		cmocka_unit_test_setup_teardown(test_shared, setup, teardown),
		cmocka_unit_test_setup_teardown(test_counted, setup, teardown),
		cmocka_unit_test_setup_teardown(test_counted_busy, setup, teardown),
		cmocka_unit_test_setup_teardown(test_minimums, setup, teardown),
		cmocka_unit_test_setup_teardown(test_excluded, setup, teardown),
		cmocka_unit_test_setup_teardown(test_counted_no_match, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unusable_gpu_skipped, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_requests, setup, teardown),
		cmocka_unit_test_setup_teardown(test_numa_one_node, setup, teardown),
		cmocka_unit_test_setup_teardown(test_numa_cpus, setup, teardown),
		cmocka_unit_test_setup_teardown(test_numa_spread, setup, teardown),
		cmocka_unit_test_setup_teardown(test_numa_unknown, setup, teardown),
		cmocka_unit_test_setup_teardown(test_numa_joins_held, setup, teardown),
		cmocka_unit_test_setup_teardown(test_same_numa, setup, teardown),
	};

	return cmocka_run_group_tests_name("alloc", tests, NULL, NULL);
}
