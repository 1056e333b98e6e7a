// SPDX-License-Identifier: Apache-2.0
/* The wait queue's order: priority first, arrival within a priority. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdint.h>

#include "server/queue.h"

static void test_priority_then_fifo(void **state)
{
	struct queue q = { 0 };
	struct queue_entry a = { .priority = 0 }, b = { .priority = 5 }, c = { .priority = 0 },
			   d = { .priority = 5 }, e = { .priority = -3 };

	(void)state;
	assert_int_equal(queue_add(&q, &a), 0);
	assert_int_equal(queue_add(&q, &b), 0);
	assert_int_equal(queue_add(&q, &c), 0);
	assert_int_equal(queue_add(&q, &d), 0);
	assert_int_equal(queue_add(&q, &e), 0);
	/* b, d (priority 5, in arrival order), a, c (0), e (-3) */
	assert_int_equal(q.n, 5);
	assert_ptr_equal(q.v[0], &b);
	assert_ptr_equal(q.v[1], &d);
	assert_ptr_equal(q.v[2], &a);
	assert_ptr_equal(q.v[3], &c);
	assert_ptr_equal(q.v[4], &e);
	assert_int_equal(queue_position(&q, &a), 3);
	queue_fini(&q);
}

static void test_remove_and_position(void **state)
{
	struct queue q = { 0 };
	struct queue_entry a = { 0 }, b = { 0 }, c = { 0 }, other = { 0 };

	(void)state;
	queue_add(&q, &a);
	queue_add(&q, &b);
	queue_add(&q, &c);
	assert_true(queue_remove(&q, &a));
	assert_false(queue_remove(&q, &a));
	assert_false(queue_remove(&q, &other));
	assert_int_equal(queue_position(&q, &b), 1);
	assert_int_equal(queue_position(&q, &c), 2);
	assert_int_equal(queue_position(&q, &a), 0);
	/* A later arrival of the same priority goes behind, even after removals. */
	queue_add(&q, &a);
	assert_int_equal(queue_position(&q, &a), 3);
	queue_fini(&q);
	assert_int_equal(q.n, 0);
}

static void test_next_deadline(void **state)
{
	struct queue q = { 0 };
	struct queue_entry a = { .deadline_ns = 0 }, b = { .deadline_ns = 900 },
			   c = { .deadline_ns = 300 };

	(void)state;
	assert_int_equal(queue_next_deadline(&q), 0);
	queue_add(&q, &a);
	assert_int_equal(queue_next_deadline(&q), 0); /* no limit */
	queue_add(&q, &b);
	queue_add(&q, &c);
	assert_int_equal(queue_next_deadline(&q), 300);
	queue_remove(&q, &c);
	assert_int_equal(queue_next_deadline(&q), 900);
	queue_fini(&q);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_priority_then_fifo),
		cmocka_unit_test(test_remove_and_position),
		cmocka_unit_test(test_next_deadline),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
