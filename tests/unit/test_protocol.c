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
#include "jsonutil.h"
#include "protocol.h"
#include "wire.h"

static void test_request_roundtrip(void **state)
{
	struct dg_request req = { .op = DG_OP_GRANT }, back;
	auto_json json_object *o = NULL;
	struct dg_error err = { 0 };

	(void)state;
	req.u.grant.target.pid = 42;
	req.u.grant.target.has_pid = true;
	req.u.grant.gpus = "0,1";
	req.u.grant.shared = true;
	o = dg_request_encode(&req);
	assert_int_equal(dg_request_decode(json_object_to_json_string(o), &back, &err), 0);
	assert_int_equal(back.op, DG_OP_GRANT);
	assert_true(back.u.grant.target.has_pid);
	assert_int_equal(back.u.grant.target.pid, 42);
	assert_string_equal(back.u.grant.gpus, "0,1");
	assert_true(back.u.grant.shared);
	assert_false(back.u.grant.has_count);
	assert_null(back.u.grant.target.cgroup);
	assert_false(back.u.grant.has_root_id);
	dg_request_done(&back);
}

/* The rootfs identity the hook saw: 64-bit values survive as decimal strings. */
static void test_request_root_id(void **state)
{
	struct dg_request req = { .op = DG_OP_GRANT }, back;
	auto_json json_object *o = NULL;
	struct dg_error err = { 0 };
	json_object *args, *id;

	(void)state;
	req.u.grant.target.pid = 42;
	req.u.grant.target.has_pid = true;
	req.u.grant.root = "/run/b/rootfs";
	req.u.grant.root_id.dev = 0xfd00000000000003ULL;
	req.u.grant.root_id.ino = 18446744073709551615ULL;
	req.u.grant.has_root_id = true;
	o = dg_request_encode(&req);
	assert_true(json_object_object_get_ex(o, "args", &args));
	assert_true(json_object_object_get_ex(args, "root_id", &id));
	assert_string_equal(json_get_str(id, "ino"), "18446744073709551615");
	assert_int_equal(dg_request_decode(json_object_to_json_string(o), &back, &err), 0);
	assert_true(back.u.grant.has_root_id);
	assert_true(back.u.grant.root_id.dev == 0xfd00000000000003ULL);
	assert_true(back.u.grant.root_id.ino == 18446744073709551615ULL);
	assert_string_equal(back.u.grant.root, "/run/b/rootfs");
	dg_request_done(&back);
}

/* grant --wait: wait and priority travel; the queue's place comes as an event of the grant. */
static void test_wait_roundtrip(void **state)
{
	struct dg_request req = { .op = DG_OP_GRANT }, back;
	union dg_stream_event ev = { .wait = { .type = "waiting", .position = 2, .of = 3 } };
	union dg_stream_event ev_back;
	auto_json json_object *o = NULL, *e = NULL;
	struct dg_arena a = { 0 };
	struct dg_error err = { 0 };

	(void)state;
	req.u.grant.target.pid = 42;
	req.u.grant.target.has_pid = true;
	req.u.grant.wait = 30;
	req.u.grant.has_wait = true;
	req.u.grant.priority = -5;
	req.u.grant.has_priority = true;
	o = dg_request_encode(&req);
	assert_int_equal(dg_request_decode(json_object_to_json_string(o), &back, &err), 0);
	assert_true(back.u.grant.has_wait);
	assert_int_equal(back.u.grant.wait, 30);
	assert_int_equal(back.u.grant.priority, -5);
	dg_request_done(&back);
	e = dg_event_encode(DG_OP_GRANT, &ev);
	assert_int_equal(dg_event_decode(DG_OP_GRANT,
					 json_object_to_json_string_ext(e, JSON_C_TO_STRING_PLAIN),
					 &ev_back, &a, &err),
			 0);
	assert_string_equal(ev_back.wait.type, "waiting");
	assert_int_equal(ev_back.wait.position, 2);
	assert_int_equal(ev_back.wait.of, 3);
	assert_null(ev_back.wait.reason);
	dg_arena_free(&a);
}

static void parse_fails(const char *line, const char *msg)
{
	struct dg_error err = { 0 };
	struct dg_request req;

	assert_true(dg_request_decode(line, &req, &err) < 0);
	assert_null(req.arena.head);
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
		    "operation 'grant': 'pid' must be an integer");
	parse_fails("{\"v\":1,\"op\":\"grant\",\"args\":{\"rm\":true}}",
		    "operation 'grant': unknown field 'rm'");
	parse_fails("{\"v\":1,\"op\":\"grant\",\"args\":{\"count\":65}}",
		    "operation 'grant': 'count' is out of range (1 to 64)");
	parse_fails("{\"v\":1,\"op\":\"grant\",\"args\":{\"pid\":0}}",
		    "operation 'grant': 'pid' is out of range (1 to 2147483647)");
	parse_fails("{\"v\":1,\"op\":\"grant\",\"args\":{\"pid\":99999999999999999999999}}",
		    "operation 'grant': 'pid' is out of range");
	/* json-c would keep the last "op" and cut the label at the NUL. */
	parse_fails("{\"v\":1,\"op\":\"list\",\"op\":\"grant\"}",
		    "malformed message: a key appears twice in one object");
	parse_fails("{\"v\":1,\"op\":\"grant\",\"args\":{\"pid\":1,\"a\":{\"x\":1,\"x\":2}}}",
		    "malformed message: a key appears twice in one object");
	/* The same key spelt two ways is still one key twice. */
	parse_fails("{\"v\":1,\"op\":\"list\",\"\\u006fp\":\"grant\"}",
		    "malformed message: a key appears twice in one object");
	parse_fails("{\"v\":1,\"op\":\"grant\",\"args\":{\"container\":\"a\\u0000b\"}}",
		    "malformed message: a string holds \\u0000");
	parse_fails("{\"v\":1,\"op\":\"list\",\"a\\u0000\":1}",
		    "malformed message: a string holds \\u0000");
	parse_fails("{\"v\":1,\"op\":\"grant\",\"args\":{\"root_id\":{\"dev\":\"1\"}}}",
		    "operation 'grant': root_id: 'ino' is missing");
	parse_fails("{\"v\":1,\"op\":\"grant\",\"args\":{\"root_id\":{\"dev\":1,\"ino\":\"2\"}}}",
		    "operation 'grant': root_id: 'dev' must be a decimal string");
	parse_fails(
		"{\"v\":1,\"op\":\"grant\",\"args\":{\"root_id\":{\"dev\":\"1\",\"ino\":\"-2\"}}}",
		"operation 'grant': root_id: 'ino' must be a decimal string");
	parse_fails(
		"{\"v\":1,\"op\":\"grant\",\"args\":{\"root_id\":{\"dev\":\"1\",\"ino\":\"2\",\"x\":1}}}",
		"operation 'grant': root_id: unknown field 'x'");
	parse_fails("{\"v\":1,\"op\":\"grant\",\"args\":{\"priority\":1001}}",
		    "operation 'grant': 'priority' is out of range (-1000 to 1000)");
	parse_fails("{\"v\":1,\"op\":\"grant\",\"args\":{\"wait\":-1}}",
		    "operation 'grant': 'wait' is out of range (0 to 31622400)");
	parse_fails("{\"v\":1,\"op\":\"status\",\"args\":{\"free\":true}}",
		    "operation: unknown field 'free'");
	parse_fails(
		"{\"v\":1,\"op\":\"list\",\"args\":{\"a\":[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]}}",
		"malformed message: nested too deep");
	/* What is logged is bounded: a label, a source, a cgroup path. */
	{
		char line[6000], big[5001];

		memset(big, 'a', sizeof(big) - 1);
		big[sizeof(big) - 1] = '\0';
		snprintf(line, sizeof(line),
			 "{\"v\":1,\"op\":\"grant\",\"args\":{\"source\":\"%.65s\"}}", big);
		parse_fails(line, "operation 'grant': 'source' is longer than 64 bytes");
		snprintf(line, sizeof(line),
			 "{\"v\":1,\"op\":\"revoke\",\"args\":{\"container\":\"%.257s\"}}", big);
		parse_fails(line, "operation 'revoke': 'container' is longer than 256 bytes");
		snprintf(line, sizeof(line),
			 "{\"v\":1,\"op\":\"grant\",\"args\":{\"cgroup\":\"/%s\"}}", big);
		parse_fails(line, "operation 'grant': 'cgroup' is longer than 4095 bytes");
	}
}

/* What the strict parse must still take: escapes that only look like its cases. */
static void test_strict_accepts(void **state)
{
	static const char *const ok[] = {
		"{\"a\":\"\\\\u0000\"}",	   /* a backslash, then u0000 */
		"{\"a\":\"\\\"b\\\":1\",\"b\":1}", /* a quote and colon in a value */
		"{\"a\\\"\":1,\"a\":2}",	   /* two keys, one with a quote */
		"{\"a\":{\"a\":{\"a\":1}}}",	   /* one name, three objects */
		"{\"a\":[{\"x\":1},{\"x\":2}]}",   /* one name, two objects */
		"{\"a\":\"\\u0001\", \"b\" : 1 }\n",
	};
	const char *why = "unset";

	(void)state;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		json_object *o = json_parse_object_why(ok[i], &why);

		if (!o)
			fail_msg("refused %s: %s", ok[i], why ? why : "(no reason)");
		assert_null(why);
		json_object_put(o);
	}
	assert_null(json_parse_object_why("{\"a\":1,\"a\":1}", &why));
	assert_string_equal(why, "a key appears twice in one object");
	assert_null(json_parse_object_why("{\"a\":1} x", &why));
	assert_null(why);
}

/* A reply goes out and comes back as the same struct, nested arrays included. */
static void test_reply_roundtrip(void **state)
{
	struct dg_lease_gpu gpus[2] = {
		{ .gpu = { .index = 0, .has_index = true, .minor = 0, .uuid = "GPU-a" },
		  .shared = true },
		{ .gpu = { .minor = 3, .uuid = "GPU-b", .problem = "no longer on this host" } },
	};
	const char *granted[] = { "GPU-a" };
	union dg_reply out = { .grant = {
				       .lease = { .cgroup_id = 18446744073709551615ULL,
						  .cgroup = "/c",
						  .pid = 7,
						  .since = "2026-11-24T00:00:00Z",
						  .gpus = gpus,
						  .n_gpus = 2 },
				       .granted = granted,
				       .n_granted = 1,
			       } };
	union dg_reply back;
	struct dg_arena a = { 0 };
	struct dg_error err = { 0 };
	auto_json json_object *msg = dg_reply_encode(DG_OP_GRANT, &out);

	(void)state;
	assert_int_equal(
		dg_reply_decode(DG_OP_GRANT, json_object_to_json_string(msg), &back, &a, &err), 0);
	assert_true(back.grant.lease.cgroup_id == 18446744073709551615ULL);
	assert_string_equal(back.grant.lease.cgroup, "/c");
	assert_null(back.grant.lease.container);
	assert_int_equal(back.grant.lease.n_gpus, 2);
	assert_true(back.grant.lease.gpus[0].shared);
	assert_true(back.grant.lease.gpus[0].gpu.has_index);
	assert_false(back.grant.lease.gpus[1].gpu.has_index);
	assert_string_equal(back.grant.lease.gpus[1].gpu.problem, "no longer on this host");
	assert_int_equal(back.grant.n_granted, 1);
	assert_string_equal(back.grant.granted[0], "GPU-a");
	assert_int_equal(back.grant.n_nodes, 0);
	dg_arena_free(&a);
}

/* A reply that lacks a field the schema requires, or has a stranger, is refused. */
static void test_reply_schema(void **state)
{
	union dg_reply back;
	struct dg_arena a = { 0 };
	struct dg_error err = { 0 };

	(void)state;
	assert_int_equal(
		dg_reply_decode(
			DG_OP_STATUS,
			"{\"v\":1,\"ok\":true,\"result\":{\"leases\":[{\"cgroup\":\"/c\"}]}}",
			&back, &a, &err),
		-EPROTO);
	assert_string_equal(err.message, "reply to 'status': leases[0]: 'cgroup_id' is missing");
	err = (struct dg_error){ 0 };
	assert_int_equal(
		dg_reply_decode(DG_OP_PING,
				"{\"v\":1,\"ok\":true,\"result\":{\"version\":\"1\",\"pid\":1,"
				"\"leases\":0,\"hook_allow_env\":false,\"extra\":1}}",
				&back, &a, &err),
		-EPROTO);
	assert_string_equal(err.message, "reply to 'ping': unknown field 'extra'");
	err = (struct dg_error){ 0 };
	assert_int_equal(
		dg_reply_decode(DG_OP_REVOKE,
				"{\"v\":1,\"ok\":true,\"result\":"
				"{\"revoked\":[],\"nodes\":[],\"holders\":[],\"killed\":0}}",
				&back, &a, &err),
		0);
	assert_false(back.revoke.has_lease);
	dg_arena_free(&a);
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
	assert_int_equal(dg_reply_parse(json_object_to_json_string(bad), &result, &err),
			 -EREMOTEIO);
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

/* A reader of replies takes a line past a request's limit, up to its own. */
static void test_linebuf_reply_limit(void **state)
{
	struct dg_linebuf lb = { .max = 3 * DG_MSG_MAX };
	static char big[DG_MSG_MAX];
	char *line = NULL;

	(void)state;
	memset(big, 'x', sizeof(big));
	for (int i = 0; i < 3; i++)
		assert_int_equal(dg_linebuf_append(&lb, big, sizeof(big)), 0);
	assert_int_equal(dg_linebuf_pop(&lb, &line), 0);
	assert_int_equal(dg_linebuf_append(&lb, "\n", 1), 0);
	assert_int_equal(dg_linebuf_pop(&lb, &line), 1);
	assert_int_equal(strlen(line), 3 * DG_MSG_MAX);
	free(line);
	dg_linebuf_free(&lb);
	assert_int_equal(lb.max, 3 * DG_MSG_MAX); /* kept for the next reply */
	assert_int_equal(dg_linebuf_append(&lb, big, sizeof(big)), 0);
	assert_int_equal(dg_linebuf_append(&lb, big, sizeof(big)), 0);
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
		cmocka_unit_test(test_request_roundtrip),
		cmocka_unit_test(test_request_root_id),
		cmocka_unit_test(test_request_rejects),
		cmocka_unit_test(test_strict_accepts),
		cmocka_unit_test(test_reply),
		cmocka_unit_test(test_reply_roundtrip),
		cmocka_unit_test(test_reply_schema),
		cmocka_unit_test(test_codes_stable),
		cmocka_unit_test(test_linebuf),
		cmocka_unit_test(test_linebuf_limit),
		cmocka_unit_test(test_linebuf_reply_limit),
		cmocka_unit_test(test_send_recv),
		cmocka_unit_test(test_wait_roundtrip),
	};

	return cmocka_run_group_tests_name("protocol", tests, NULL, NULL);
}
