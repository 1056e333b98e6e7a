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

#include "alloc.h"
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

/* Runs a request for cgid; returns the picked GPUs as "0110"-style text. */
static int pick(uint64_t cgid, const struct alloc_request *req, char *out, struct dg_error *err)
{
	struct gpu_use use[4];
	bool picked[4];
	int r;

	alloc_usage(&inv, &table, cgid, use);
	r = alloc_pick(&inv, use, lease_table_find(&table, cgid), req, picked, err);
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
	};

	return cmocka_run_group_tests_name("alloc", tests, NULL, NULL);
}
