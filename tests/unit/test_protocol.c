// SPDX-License-Identifier: Apache-2.0
/* The wire protocol: requests, replies, validation, framing. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cleanup.h"
#include "protocol.h"

static void test_request_roundtrip(void **state)
{
	json_object *args = json_object_new_object();
	auto_json json_object *req = NULL, *parsed = NULL;
	struct dg_error err = { 0 };
	enum dg_op op;

	(void)state;
	json_object_object_add(args, "pid", json_object_new_int(42));
	json_object_object_add(args, "gpus", json_object_new_string("0,1"));
	req = dg_request_new(DG_OP_GRANT, args);
	assert_int_equal(dg_request_parse(json_object_to_json_string(req), &op, &parsed, &err), 0);
	assert_int_equal(op, DG_OP_GRANT);
	assert_int_equal(json_object_get_int(json_object_object_get(parsed, "pid")), 42);
}

static void parse_fails(const char *line, const char *msg)
{
	struct dg_error err = { 0 };
	json_object *args = NULL;
	enum dg_op op;

	assert_true(dg_request_parse(line, &op, &args, &err) < 0);
	assert_null(args);
	assert_int_equal(err.code, DG_E_PROTOCOL);
	assert_string_equal(err.message, msg);
}

static void test_request_rejects(void **state)
{
	(void)state;
	parse_fails("nope", "malformed message: not one JSON object");
	parse_fails("[1]", "malformed message: not one JSON object");
	parse_fails("{\"v\":1,\"op\":\"list\"} {}", "malformed message: not one JSON object");
	parse_fails("{\"op\":\"list\"}", "message lacks protocol version 'v'");
	parse_fails("{\"v\":2,\"op\":\"list\"}",
		    "protocol version 2 is not supported (this side speaks 1)");
	parse_fails("{\"v\":1}", "request lacks 'op'");
	parse_fails("{\"v\":1,\"op\":\"format_disk\"}", "unknown operation 'format_disk'");
	parse_fails("{\"v\":1,\"op\":\"list\",\"x\":1}", "request has unknown field 'x'");
	parse_fails("{\"v\":1,\"op\":\"list\",\"args\":[]}", "'args' must be an object");
	parse_fails("{\"v\":1,\"op\":\"grant\",\"args\":{\"pid\":\"42\"}}",
		    "argument 'pid' of 'grant' must be a int");
	parse_fails("{\"v\":1,\"op\":\"grant\",\"args\":{\"rm\":true}}",
		    "operation 'grant' has no argument 'rm'");
	parse_fails("{\"v\":1,\"op\":\"list\",\"args\":{\"a\":[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]}}",
		    "malformed message: not one JSON object");
}

static void test_reply(void **state)
{
	auto_json json_object *ok = NULL, *bad = NULL, *result = NULL;
	struct dg_error err = { 0 }, in = { 0 };

	(void)state;
	ok = dg_reply_ok(json_object_new_string("x"));
	assert_int_equal(dg_reply_parse(json_object_to_json_string(ok), &result, &err), 0);
	assert_string_equal(json_object_get_string(result), "x");

	dg_error_set(&in, DG_E_UNAVAILABLE, EBUSY, "GPU %d held", 1);
	dg_error_hint(&in, "wait");
	bad = dg_reply_error(&in);
	assert_int_equal(dg_reply_parse(json_object_to_json_string(bad), &result, &err), -EREMOTEIO);
	assert_int_equal(err.code, DG_E_UNAVAILABLE);
	assert_string_equal(err.message, "GPU 1 held");
	assert_string_equal(err.hint, "wait");
	assert_int_equal(dg_code_info(err.code)->exit_code, 8);
}

static void test_codes_stable(void **state)
{
	enum dg_code c;

	(void)state;
	/* Exit codes are documented; changing one breaks callers' scripts. */
	assert_int_equal(dg_code_info(DG_E_UNREACHABLE)->exit_code, 3);
	assert_int_equal(dg_code_info(DG_E_PERM)->exit_code, 4);
	assert_int_equal(dg_code_info(DG_E_NO_TARGET)->exit_code, 5);
	assert_int_equal(dg_code_info(DG_E_NODE_CONFLICT)->exit_code, 9);
	assert_int_equal(dg_code_info(DG_CODE_MAX)->exit_code, 1);
	for (int i = 0; i < DG_CODE_MAX; i++) {
		assert_int_equal(dg_code_from_name(dg_code_info(i)->name, &c), 0);
		assert_int_equal(c, i);
	}
	assert_int_equal(dg_code_from_name("nope", &c), -ENOENT);
}

static void test_linebuf(void **state)
{
	struct dg_linebuf lb = { 0 };
	char *line = NULL;

	(void)state;
	assert_int_equal(dg_linebuf_append(&lb, "ab", 2), 0);
	assert_int_equal(dg_linebuf_pop(&lb, &line), 0);
	assert_int_equal(dg_linebuf_append(&lb, "c\nde\n", 5), 0);
	assert_int_equal(dg_linebuf_pop(&lb, &line), 1);
	assert_string_equal(line, "abc");
	free(line);
	assert_int_equal(dg_linebuf_pop(&lb, &line), 1);
	assert_string_equal(line, "de");
	free(line);
	assert_int_equal(dg_linebuf_pop(&lb, &line), 0);
	dg_linebuf_free(&lb);
}

static void test_linebuf_limit(void **state)
{
	struct dg_linebuf lb = { 0 };
	static char big[DG_MSG_MAX];

	(void)state;
	memset(big, 'x', sizeof(big));
	assert_int_equal(dg_linebuf_append(&lb, big, sizeof(big)), 0);
	assert_int_equal(dg_linebuf_append(&lb, "xx", 2), -EMSGSIZE);
	dg_linebuf_free(&lb);
}

static void test_send_recv(void **state)
{
	int sv[2];
	struct dg_linebuf lb = { 0 };
	auto_json json_object *msg = dg_reply_ok(NULL);
	char *line = NULL;

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(dg_send(sv[0], msg), 0);
	assert_int_equal(dg_recv_line(sv[1], &lb, &line), 0);
	assert_string_equal(line, "{\"v\":1,\"ok\":true,\"result\":{}}");
	free(line);
	close(sv[0]);
	assert_int_equal(dg_recv_line(sv[1], &lb, &line), -ECONNRESET);
	close(sv[1]);
	dg_linebuf_free(&lb);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_request_roundtrip), cmocka_unit_test(test_request_rejects),
		cmocka_unit_test(test_reply),		  cmocka_unit_test(test_codes_stable),
		cmocka_unit_test(test_linebuf),		  cmocka_unit_test(test_linebuf_limit),
		cmocka_unit_test(test_send_recv),
	};

	return cmocka_run_group_tests_name("protocol", tests, NULL, NULL);
}
