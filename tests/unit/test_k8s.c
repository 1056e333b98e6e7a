// SPDX-License-Identifier: Apache-2.0
/* devgate-k8s's decisions (k8s/devices.c): devgated's list -> devices and
 * health, the preferred pick, Allocate's checks and CDI names. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "devices.h"
#include "wire.h"

#define U0 "GPU-5e1f0a00-1000-2000-3000-4d0000000000"
#define U1 "GPU-5e200b01-1001-2001-3001-4d0000000001"
#define U2 "GPU-5e210c02-1002-2002-3002-4d0000000002"
#define U3 "GPU-5e220d03-1003-2003-3003-4d0000000003"

/* A list reply as devgated sends it: GPU 0 held, 1 free, 2 unusable, 3 free. */
static const char list_line[] =
	"{\"v\":1,\"ok\":true,\"result\":{\"host_root\":\"/\",\"free_only\":false,"
	"\"driver\":{\"loaded\":true,\"nvidia_major\":195},"
	"\"gpus\":["
	"{\"index\":0,\"minor\":0,\"uuid\":\"" U0 "\",\"state\":\"held\",\"holders\":"
	"[{\"container\":\"job7\",\"cgroup\":\"/job7\",\"pid\":42,\"shared\":false}]},"
	"{\"index\":1,\"minor\":1,\"uuid\":\"" U1 "\",\"state\":\"free\",\"holders\":[]},"
	"{\"index\":2,\"minor\":2,\"uuid\":\"" U2 "\",\"state\":\"unusable\",\"holders\":[],"
	"\"problem\":\"host node /dev/nvidia2 is not character device 195:2\"},"
	"{\"index\":3,\"minor\":3,\"uuid\":\"" U3 "\",\"state\":\"free\",\"holders\":[]}],"
	"\"control_nodes\":[]}}";

static void from_line(struct k8s_devices *d)
{
	struct dg_arena a = { 0 };
	struct dg_error err = { 0 };
	union dg_reply reply;

	assert_int_equal(dg_reply_decode(DG_OP_LIST, list_line, &reply, &a, &err), 0);
	assert_int_equal(k8s_devices_from_list(&reply.list, d), 0);
	dg_arena_free(&a);
}

static void test_list(void **state)
{
	struct k8s_devices d;

	(void)state;
	from_line(&d);
	assert_int_equal(d.n, 4);
	assert_string_equal(d.dev[0].id, U0);
	assert_true(d.dev[0].healthy);
	assert_false(d.dev[0].free);
	assert_true(d.dev[1].healthy);
	assert_true(d.dev[1].free);
	assert_int_equal(d.dev[1].index, 1);
	/* Unusable, with devgated's reason kept for the log. */
	assert_false(d.dev[2].healthy);
	assert_string_equal(d.dev[2].why, "host node /dev/nvidia2 is not character device 195:2");
	assert_true(d.dev[3].healthy);
}

static void test_list_edges(void **state)
{
	struct dg_list_gpu gpus[K8S_MAX_DEVICES + 1];
	char uuids[K8S_MAX_DEVICES + 1][48];
	struct dg_list_reply list = { .gpus = gpus, .n_gpus = 3 };
	static struct k8s_devices d;

	(void)state;
	memset(gpus, 0, sizeof(gpus));
	for (size_t i = 0; i < K8S_MAX_DEVICES + 1; i++) {
		snprintf(uuids[i], sizeof(uuids[i]), "GPU-%zu", i);
		gpus[i].gpu.uuid = uuids[i];
		gpus[i].state = "free";
	}
	/* No UUID: kubelet could not name it again; left out. */
	gpus[1].gpu.uuid = "";
	/* State unusable without a problem text is still unhealthy. */
	gpus[2].state = "unusable";
	assert_int_equal(k8s_devices_from_list(&list, &d), 0);
	assert_int_equal(d.n, 2);
	assert_string_equal(d.dev[1].id, "GPU-2");
	assert_int_equal(d.dev[1].index, 2); /* no index in the reply: its position */
	assert_false(d.dev[1].healthy);
	assert_string_equal(d.dev[1].why, "devgated lists it unusable");
	/* More GPUs than the plugin keeps: the first ones, and -E2BIG. */
	gpus[1].gpu.uuid = uuids[1];
	list.n_gpus = K8S_MAX_DEVICES + 1;
	assert_int_equal(k8s_devices_from_list(&list, &d), -E2BIG);
	assert_int_equal(d.n, K8S_MAX_DEVICES);
}

static void test_health_changes(void **state)
{
	struct k8s_devices a, b;

	(void)state;
	from_line(&a);
	b = a;
	assert_true(k8s_devices_same(&a, &b));
	/* A holder change alone is not news for kubelet... */
	b.dev[1].free = false;
	assert_true(k8s_devices_same(&a, &b));
	/* ...health is, and so are devices that come or go. */
	b.dev[1].healthy = false;
	assert_false(k8s_devices_same(&a, &b));
	b = a;
	b.n = 3;
	assert_false(k8s_devices_same(&a, &b));
	/* devgated unreachable: the same devices, all unhealthy, with the reason. */
	b = a;
	k8s_devices_unreachable(&b, "devgated unreachable for 5000 ms");
	assert_int_equal(b.n, 4);
	for (size_t i = 0; i < b.n; i++) {
		assert_false(b.dev[i].healthy);
		assert_string_equal(b.dev[i].why, "devgated unreachable for 5000 ms");
	}
	assert_false(k8s_devices_same(&a, &b));
}

static void test_pick(void **state)
{
	const char *all[] = { U3, U2, U0, U1 };
	const char *must[] = { U0 };
	const char *unknown[] = { "GPU-x", U1 };
	const char *ret[4];
	struct k8s_devices d;

	(void)state;
	from_line(&d);
	/* Free first, then the lowest index: GPU 1, then 3; held 0 before unusable 2. */
	assert_int_equal(k8s_pick(&d, all, 4, NULL, 0, 1, ret), 1);
	assert_string_equal(ret[0], U1);
	assert_int_equal(k8s_pick(&d, all, 4, NULL, 0, 4, ret), 4);
	assert_string_equal(ret[1], U3);
	assert_string_equal(ret[2], U0);
	assert_string_equal(ret[3], U2);
	/* must_include comes first, even held, and is not picked twice. */
	assert_int_equal(k8s_pick(&d, all, 4, must, 1, 2, ret), 2);
	assert_string_equal(ret[0], U0);
	assert_string_equal(ret[1], U1);
	/* Fewer available than asked: what there is. */
	assert_int_equal(k8s_pick(&d, all + 2, 1, NULL, 0, 3, ret), 1);
	/* Unknown IDs come last. */
	assert_int_equal(k8s_pick(&d, unknown, 2, NULL, 0, 2, ret), 2);
	assert_string_equal(ret[0], U1);
	assert_string_equal(ret[1], "GPU-x");
	/* More must_include than the size: refused. */
	assert_int_equal(k8s_pick(&d, all, 4, all, 2, 1, ret), -EINVAL);
	assert_int_equal(k8s_pick(&d, all, 4, NULL, 0, 0, ret), 0);
}

/* Requests kubelet could not send are refused before any work: every list bounded. */
static void test_pick_bounds(void **state)
{
	const char *many[K8S_MAX_DEVICES + 1], *twice[] = { U1, U1, U3 };
	const char *ret[K8S_MAX_DEVICES];
	struct k8s_devices d;
	char why[K8S_WHY_MAX];

	(void)state;
	from_line(&d);
	for (size_t i = 0; i < K8S_MAX_DEVICES + 1; i++)
		many[i] = U0;
	assert_int_equal(k8s_pick_check(4, 1, 2, why, sizeof(why)), 0);
	assert_int_equal(k8s_pick_check(K8S_MAX_DEVICES, 0, K8S_MAX_DEVICES, why, sizeof(why)), 0);
	assert_int_equal(k8s_pick_check(4, 0, 2147483647LL, why, sizeof(why)), -E2BIG);
	assert_string_equal(why, "allocation_size 2147483647 with 4 available IDs: devgate-k8s "
				 "offers at most 64 devices, so kubelet never asks for more");
	assert_int_equal(k8s_pick_check(100000, 0, 1, why, sizeof(why)), -E2BIG);
	assert_int_equal(k8s_pick_check(4, 0, -1, why, sizeof(why)), -EINVAL);
	assert_string_equal(why, "negative allocation_size -1");
	assert_int_equal(k8s_pick_check(4, 3, 2, why, sizeof(why)), -EINVAL);
	assert_string_equal(why, "more must_include IDs (3) than allocation_size (2)");
	/* k8s_pick itself takes no more than the bound either. */
	assert_int_equal(k8s_pick(&d, many, K8S_MAX_DEVICES + 1, NULL, 0, 1, ret), -E2BIG);
	assert_int_equal(k8s_pick(&d, many, 1, NULL, 0, K8S_MAX_DEVICES + 1, ret), -E2BIG);
	/* An ID named twice is picked once. */
	assert_int_equal(k8s_pick(&d, twice, 3, NULL, 0, 3, ret), 2);
	assert_string_equal(ret[0], U1);
	assert_string_equal(ret[1], U3);
	/* Allocate: at most K8S_MAX_DEVICES IDs. */
	assert_int_equal(k8s_allocate_check(&d, many, K8S_MAX_DEVICES + 1, why, sizeof(why)),
			 -E2BIG);
	assert_string_equal(why, "65 device IDs: devgate-k8s offers at most 64 devices");
}

static void test_allocate(void **state)
{
	const char *ok[] = { U1, U0 };
	const char *unhealthy[] = { U1, U2 };
	const char *unknown[] = { "GPU-nope" };
	struct k8s_devices d;
	char why[256], name[128];

	(void)state;
	from_line(&d);
	assert_int_equal(k8s_allocate_check(&d, ok, 2, why, sizeof(why)), 0);
	assert_int_equal(k8s_allocate_check(&d, unhealthy, 2, why, sizeof(why)), -EBUSY);
	assert_string_equal(why, "GPU " U2 " is unhealthy: host node /dev/nvidia2 is not "
				 "character device 195:2");
	assert_int_equal(k8s_allocate_check(&d, unknown, 1, why, sizeof(why)), -ENOENT);
	assert_string_equal(why, "devgated has no GPU 'GPU-nope'");
	/* The names 'devgatectl cdi generate' gives its devices by UUID. */
	assert_int_equal(k8s_cdi_name("devgate.io/gpu", U1, name, sizeof(name)), 0);
	assert_string_equal(name, "devgate.io/gpu=" U1);
	assert_int_equal(k8s_cdi_name("devgate.io/gpu", U1, name, 20), -ENAMETOOLONG);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_list),	       cmocka_unit_test(test_list_edges),
		cmocka_unit_test(test_health_changes), cmocka_unit_test(test_pick),
		cmocka_unit_test(test_pick_bounds),    cmocka_unit_test(test_allocate),
	};

	return cmocka_run_group_tests_name("k8s", tests, NULL, NULL);
}
