// SPDX-License-Identifier: Apache-2.0
/* Connection slots on the control socket: by uid, by authority, root always. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdint.h>

#include "server/admit.h"

static const struct admit_limits lim = {
	.max_clients = 8, .per_uid = 3, .streams_per_uid = 2, .reserved = 4
};

static void test_per_uid_and_root(void **state)
{
	struct admit a;

	(void)state;
	admit_init(&a, &lim);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(admit_check(&a, 1000, PEER_ADMIN), ADMIT_YES);
		assert_int_equal(admit_add(&a, 1000, PEER_ADMIN), 0);
	}
	assert_true(admit_uid_full(&a, 1000));
	assert_int_equal(admit_check(&a, 1000, PEER_ADMIN), ADMIT_NO_UID);
	assert_false(admit_uid_full(&a, 1001));
	/* Root is never counted by uid, and gets in past max-clients. */
	for (int i = 0; i < 10; i++) {
		assert_int_equal(admit_check(&a, 0, PEER_ADMIN), ADMIT_YES);
		assert_int_equal(admit_add(&a, 0, PEER_ADMIN), 0);
	}
	assert_false(admit_uid_full(&a, 0));
	assert_int_equal(admit_of(&a, 0).conns, 0);
	assert_int_equal(a.total, 13);
	assert_int_equal(admit_check(&a, 1001, PEER_ADMIN), ADMIT_NEED_ROOM);
	/* A uid leaves the table with its last connection. */
	for (int i = 0; i < 3; i++)
		admit_del(&a, 1000, PEER_ADMIN, false);
	assert_int_equal(a.n, 0);
	assert_int_equal(a.total, 10);
	admit_free(&a);
}

static void test_readers_share(void **state)
{
	struct admit a;

	(void)state;
	admit_init(&a, &lim);
	/* Readers hold max_clients - reserved = 4 together, whatever their uids. */
	for (uid_t u = 2000; u < 2004; u++) {
		assert_int_equal(admit_check(&a, u, PEER_READER), ADMIT_YES);
		assert_int_equal(admit_add(&a, u, PEER_READER), 0);
	}
	assert_int_equal(admit_check(&a, 2004, PEER_READER), ADMIT_NEED_READER);
	/* The reserved slots are an admin's. */
	for (uid_t u = 3000; u < 3004; u++) {
		assert_int_equal(admit_check(&a, u, PEER_ADMIN), ADMIT_YES);
		assert_int_equal(admit_add(&a, u, PEER_ADMIN), 0);
	}
	assert_int_equal(admit_check(&a, 3004, PEER_ADMIN), ADMIT_NEED_ROOM);
	admit_del(&a, 2000, PEER_READER, false);
	assert_int_equal(a.readers, 3);
	assert_int_equal(admit_check(&a, 2004, PEER_READER), ADMIT_YES);
	assert_int_equal(
		admit_readers_max(&(struct admit_limits){ .max_clients = 4, .reserved = 9 }), 1);
	admit_free(&a);
}

static void test_streams(void **state)
{
	struct admit a;

	(void)state;
	admit_init(&a, &lim);
	for (int i = 0; i < 3; i++)
		assert_int_equal(admit_add(&a, 1000, PEER_READER), 0);
	admit_stream(&a, 1000);
	assert_int_equal(admit_stream_check(&a, 1000), ADMIT_YES);
	admit_stream(&a, 1000);
	assert_int_equal(admit_stream_check(&a, 1000), ADMIT_NO_STREAM);
	assert_int_equal(admit_stream_check(&a, 0), ADMIT_YES);
	admit_del(&a, 1000, PEER_READER, true);
	assert_int_equal(admit_of(&a, 1000).streams, 1);
	assert_int_equal(admit_stream_check(&a, 1000), ADMIT_YES);
	admit_free(&a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_per_uid_and_root),
		cmocka_unit_test(test_readers_share),
		cmocka_unit_test(test_streams),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
