// SPDX-License-Identifier: Apache-2.0
/* devgatectl's option parsing and exit codes, without a daemon. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"

typedef int (*parse_fn)(struct cli *cli, int argc, char **argv, struct dg_request *req, bool *done);

/* Runs parse over a NULL-terminated list of words, as main() would call it. */
static int parse(parse_fn fn, struct cli *cli, struct dg_request *req, bool *done, ...)
{
	char *argv[32];
	int argc = 0;
	va_list ap;

	va_start(ap, done);
	for (char *w = va_arg(ap, char *); w && argc < 31; w = va_arg(ap, char *))
		argv[argc++] = w;
	va_end(ap);
	argv[argc] = NULL;
	*cli = (struct cli){ .socket = "/nonexistent" };
	optind = 0;
	opterr = 0;
	return fn(cli, argc, argv, req, done);
}

static void test_grant_ok(void **state)
{
	struct cli cli;
	struct dg_request req;
	bool done;

	(void)state;
	assert_int_equal(parse(grant_parse, &cli, &req, &done, "grant", "--pid", "42", "--gpu",
			       "0,1", "-S", "--container", "job", "--root", "/r", "-j", NULL),
			 0);
	assert_false(done);
	assert_int_equal(req.op, DG_OP_GRANT);
	assert_true(req.u.grant.target.has_pid);
	assert_int_equal(req.u.grant.target.pid, 42);
	assert_string_equal(req.u.grant.gpus, "0,1");
	assert_true(req.u.grant.shared);
	assert_string_equal(req.u.grant.target.container, "job");
	assert_string_equal(req.u.grant.root, "/r");
	assert_string_equal(req.u.grant.target.source, "cli");
	assert_true(cli.json);
	assert_int_equal(parse(grant_parse, &cli, &req, &done, "grant", "-c", "/c", "-N", "3",
			       "--arch", "hopper", NULL),
			 0);
	assert_string_equal(req.u.grant.target.cgroup, "/c");
	assert_true(req.u.grant.has_count);
	assert_int_equal(req.u.grant.count, 3);
	assert_string_equal(req.u.grant.arch, "hopper");
}

/* The bug this convention fixed: a bad count after a good selector was sent anyway. */
static void test_grant_bad_count_stops(void **state)
{
	struct cli cli;
	struct dg_request req;
	bool done;

	(void)state;
	assert_int_equal(parse(grant_parse, &cli, &req, &done, "grant", "--pid", "1", "--gpu", "0",
			       "--gpus", "99", NULL),
			 -EINVAL);
	assert_int_equal(cli.err.code, DG_E_INVALID);
	assert_string_equal(cli.err.message, "grant: --gpus wants a count from 1 to 64, not '99'");
	assert_int_equal(cli_exit(&(struct cli){ .err = cli.err, .reported = true }, -EINVAL), 2);
}

static void test_grant_rejects(void **state)
{
	struct cli cli;
	struct dg_request req;
	bool done;

	(void)state;
	assert_int_equal(parse(grant_parse, &cli, &req, &done, "grant", "--gpu", "0", NULL),
			 -EINVAL);
	assert_string_equal(cli.err.message,
			    "grant: name the container with --pid, --cgroup or --container");
	assert_string_equal(cli.err.hint, "see 'devgatectl grant --help'");
	assert_int_equal(parse(grant_parse, &cli, &req, &done, "grant", "--pid", "1", NULL),
			 -EINVAL);
	assert_int_equal(parse(grant_parse, &cli, &req, &done, "grant", "--pid", "x1", "--gpu", "0",
			       NULL),
			 -EINVAL);
	assert_string_equal(cli.err.message, "grant: 'x1' is not a PID");
	assert_int_equal(parse(grant_parse, &cli, &req, &done, "grant", "--pid", "1", "--gpu", "0",
			       "-s", NULL),
			 -EINVAL);
	assert_non_null(strstr(cli.err.message, "-S (--shared)"));
	assert_int_equal(parse(grant_parse, &cli, &req, &done, "grant", "--pid", "1", "--gpu", "0",
			       "extra", NULL),
			 -EINVAL);
	assert_string_equal(cli.err.message, "grant: unexpected argument 'extra'");
	assert_int_equal(parse(grant_parse, &cli, &req, &done, "grant", "--bogus", NULL), -EINVAL);
}

static void test_help_is_not_an_error(void **state)
{
	struct cli cli;
	struct dg_request req;
	bool done;

	(void)state;
	assert_int_equal(parse(grant_parse, &cli, &req, &done, "grant", "--help", NULL), 0);
	assert_true(done);
	assert_int_equal(parse(revoke_parse, &cli, &req, &done, "revoke", "-h", NULL), 0);
	assert_true(done);
	assert_int_equal(parse(list_parse, &cli, &req, &done, "list", "--help", NULL), 0);
	assert_true(done);
	assert_int_equal(cli_exit(&cli, 0), 0);
}

static void test_revoke_and_list(void **state)
{
	struct cli cli;
	struct dg_request req;
	bool done;

	(void)state;
	assert_int_equal(parse(revoke_parse, &cli, &req, &done, "revoke", "--container", "job",
			       "--missing-ok", "--gpu", "1", NULL),
			 0);
	assert_int_equal(req.op, DG_OP_REVOKE);
	assert_string_equal(req.u.revoke.target.container, "job");
	assert_true(req.u.revoke.missing_ok);
	assert_string_equal(req.u.revoke.gpus, "1");
	assert_int_equal(parse(revoke_parse, &cli, &req, &done, "revoke", "--gpu", "1", NULL),
			 -EINVAL);
	assert_int_equal(parse(list_parse, &cli, &req, &done, "list", "-f", NULL), 0);
	assert_int_equal(req.op, DG_OP_LIST);
	assert_true(req.u.list.free);
	assert_int_equal(parse(list_parse, &cli, &req, &done, "list", "x", NULL), -EINVAL);
}

/* --device is repeatable, combines with --gpu, and alone is a request. */
static void test_devices(void **state)
{
	struct cli cli;
	struct dg_request req;
	bool done;

	(void)state;
	assert_int_equal(parse(grant_parse, &cli, &req, &done, "grant", "--pid", "42", "--device",
			       "/dev/full", "-d", "/dev/char/1:7:/dev/myfull", "--gpu", "0", NULL),
			 0);
	assert_int_equal(req.u.grant.n_devices, 2);
	assert_string_equal(req.u.grant.devices[0], "/dev/full");
	assert_string_equal(req.u.grant.devices[1], "/dev/char/1:7:/dev/myfull");
	assert_string_equal(req.u.grant.gpus, "0");
	dg_arena_free(&req.arena);
	assert_int_equal(parse(grant_parse, &cli, &req, &done, "grant", "--pid", "42", "--device",
			       "/dev/full", NULL),
			 0);
	assert_int_equal(req.u.grant.n_devices, 1);
	assert_null(req.u.grant.gpus);
	assert_false(req.u.grant.has_count);
	dg_arena_free(&req.arena);
	/* Usage errors: an empty path, no request at all. */
	assert_int_equal(parse(grant_parse, &cli, &req, &done, "grant", "--pid", "42", "--device",
			       "", NULL),
			 -EINVAL);
	assert_int_equal(cli.err.code, DG_E_INVALID);
	dg_arena_free(&req.arena);
	assert_int_equal(parse(grant_parse, &cli, &req, &done, "grant", "--pid", "42", NULL),
			 -EINVAL);
	assert_int_equal(parse(revoke_parse, &cli, &req, &done, "revoke", "--pid", "42", "--device",
			       "/dev/myfull", "--device", "/dev/zero", NULL),
			 0);
	assert_int_equal(req.u.revoke.n_devices, 2);
	assert_string_equal(req.u.revoke.devices[0], "/dev/myfull");
	assert_string_equal(req.u.revoke.devices[1], "/dev/zero");
	assert_null(req.u.revoke.gpus);
	dg_arena_free(&req.arena);
}

/* Exit codes are made in cli_exit() alone, from the error's code. */
static void test_exit_codes(void **state)
{
	struct cli cli = { .reported = true };

	(void)state;
	dg_error_set(&cli.err, DG_E_NO_TARGET, ESRCH, "gone");
	assert_int_equal(cli_exit(&cli, -ESRCH), 5);
	cli.err = (struct dg_error){ 0 };
	assert_int_equal(cli_exit(&cli, -ENOMEM), 1);
	dg_error_set(&cli.err, DG_E_CHECK, EIO, "a check failed");
	assert_int_equal(cli_exit(&cli, -EIO), 1);
}

static void test_ttl_options(void **state)
{
	struct cli cli;
	struct dg_request req;
	bool done;

	(void)state;
	assert_int_equal(parse(grant_parse, &cli, &req, &done, "grant", "--pid", "42", "--gpu", "0",
			       "--ttl", "10m", "--kill-on-expiry", NULL),
			 0);
	assert_true(req.u.grant.has_ttl);
	assert_int_equal(req.u.grant.ttl, 600);
	assert_true(req.u.grant.kill_on_expiry);
	assert_int_equal(parse(grant_parse, &cli, &req, &done, "grant", "-p", "1", "-g", "0",
			       "--ttl", "2h", NULL),
			 0);
	assert_int_equal(req.u.grant.ttl, 7200);
	assert_false(req.u.grant.kill_on_expiry);
	assert_int_equal(parse(grant_parse, &cli, &req, &done, "grant", "-p", "1", "-g", "0", NULL),
			 0);
	assert_false(req.u.grant.has_ttl);
	assert_int_equal(parse(grant_parse, &cli, &req, &done, "grant", "-p", "1", "-g", "0",
			       "--ttl", "0", NULL),
			 -EINVAL);
	assert_string_equal(cli.err.message,
			    "grant: --ttl wants a duration, not '0' (from 1 second to 366 days)");
	assert_int_equal(parse(grant_parse, &cli, &req, &done, "grant", "-p", "1", "-g", "0",
			       "--ttl", "soon", NULL),
			 -EINVAL);
	assert_string_equal(cli.err.message, "grant: --ttl wants a duration, not 'soon'");
	assert_int_equal(parse(grant_parse, &cli, &req, &done, "grant", "-p", "1", "-g", "0",
			       "--kill-on-expiry", NULL),
			 -EINVAL);
	assert_string_equal(cli.err.message, "grant: --kill-on-expiry needs --ttl DURATION");

	assert_int_equal(parse(extend_parse, &cli, &req, &done, "extend", "--container", "job",
			       "--by", "90s", NULL),
			 0);
	assert_int_equal(req.op, DG_OP_EXTEND);
	assert_string_equal(req.u.extend.target.container, "job");
	assert_true(req.u.extend.has_by);
	assert_int_equal(req.u.extend.by, 90);
	assert_false(req.u.extend.has_ttl);
	assert_int_equal(parse(extend_parse, &cli, &req, &done, "extend", "-p", "7", "--ttl", "1d",
			       NULL),
			 0);
	assert_true(req.u.extend.has_ttl);
	assert_int_equal(req.u.extend.ttl, 86400);
	assert_int_equal(parse(extend_parse, &cli, &req, &done, "extend", "-p", "7", NULL),
			 -EINVAL);
	assert_string_equal(cli.err.message,
			    "extend: say how much longer with one of --by or --ttl");
	assert_int_equal(parse(extend_parse, &cli, &req, &done, "extend", "-p", "7", "-c", "/c",
			       "--by", "1m", NULL),
			 -EINVAL);
	assert_int_equal(parse(extend_parse, &cli, &req, &done, "extend", "--by", "1m", NULL),
			 -EINVAL);
	assert_string_equal(
		cli.err.message,
		"extend: name the container with one of --pid, --cgroup or --container");
	assert_int_equal(parse(extend_parse, &cli, &req, &done, "extend", "-p", "7", "--by", "-1m",
			       NULL),
			 -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_grant_ok),
		cmocka_unit_test(test_grant_bad_count_stops),
		cmocka_unit_test(test_grant_rejects),
		cmocka_unit_test(test_help_is_not_an_error),
		cmocka_unit_test(test_revoke_and_list),
		cmocka_unit_test(test_devices),
		cmocka_unit_test(test_exit_codes),
		cmocka_unit_test(test_ttl_options),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
