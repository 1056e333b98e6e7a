// SPDX-License-Identifier: Apache-2.0
/* What every command that talks to devgated shares: one call, a stream, common options. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>

#include "cleanup.h"
#include "client.h"
#include "commands.h"

const char cmd_common_help[] = "  -j, --json             print JSON instead of text\n"
			       "  -h, --help             show this help\n";

void cmd_print_reply(enum dg_op op, const union dg_reply *reply)
{
	auto_json json_object *o = dg_encode(dg_op_info(op)->reply, reply);

	print_json(o);
}

int cmd_call(struct cli *cli, const struct dg_request *req,
	     void (*render)(const struct cli *cli, const union dg_reply *reply))
{
	return cmd_call_wait(cli, req, render, NULL);
}

int cmd_call_wait(struct cli *cli, const struct dg_request *req,
		  void (*render)(const struct cli *cli, const union dg_reply *reply),
		  client_wait_fn on_wait)
{
	struct dg_arena arena = { 0 };
	union dg_reply reply;
	int r = client_request_wait(cli->socket, cli->timeout_s, req, on_wait, cli, &reply, &arena,
				    &cli->err);

	if (r == 0 && cli->json)
		cmd_print_reply(req->op, &reply);
	else if (r == 0)
		render(cli, &reply);
	dg_arena_free(&arena);
	return r < 0 ? cli_error(cli, &cli->err) : 0;
}

int cmd_no_more_args(struct cli *cli, const char *cmd, int argc, char **argv)
{
	if (optind < argc)
		return cli_usage(cli, cmd, "unexpected argument '%s'", argv[optind]);
	return 0;
}

int cmd_common_options(struct cli *cli, const char *cmd, const char *help, int argc, char **argv,
		       bool *done)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int o;

	*done = false;
	while ((o = getopt_long(argc, argv, "jh", opts, NULL)) != -1) {
		if (o == 'j') {
			cli->json = true;
		} else if (o == 'h') {
			printf("%s%s", help, cmd_common_help);
			*done = true;
			return 0;
		} else {
			return cli_usage(cli, cmd, "unknown option");
		}
	}
	return cmd_no_more_args(cli, cmd, argc, argv);
}

static void print_event_json(enum dg_op op, const union dg_stream_event *ev)
{
	auto_json json_object *o = dg_encode(dg_op_info(op)->event, ev);

	puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
						       JSON_C_TO_STRING_NOSLASHESCAPE));
	fflush(stdout);
}

static int follow(struct cli *cli, struct client_conn *c, enum dg_op op,
		  void (*on_event)(const struct cli *cli, const union dg_stream_event *ev))
{
	for (;;) {
		struct dg_arena arena = { 0 };
		union dg_stream_event ev;
		int r = client_next_event(c, op, &ev, &arena, &cli->err);

		if (r == 0 && cli->json)
			print_event_json(op, &ev);
		else if (r == 0)
			on_event(cli, &ev);
		dg_arena_free(&arena);
		if (r == -ECONNRESET)
			dg_error_set(&cli->err, DG_E_UNREACHABLE, ECONNRESET, "devgated stopped");
		if (r < 0)
			return cli_error(cli, &cli->err);
	}
}

int cmd_stream(struct cli *cli, const struct dg_request *req,
	       void (*on_result)(const struct cli *cli, const union dg_reply *reply),
	       void (*on_event)(const struct cli *cli, const union dg_stream_event *ev))
{
	struct client_conn c = { .fd = -1 };
	struct dg_arena arena = { 0 };
	union dg_reply reply;
	int r;

	r = client_connect(cli->socket, cli->timeout_s, &c, &cli->err);
	if (r == 0)
		r = client_call(&c, req, &reply, &arena, &cli->err);
	if (r == 0 && on_result)
		on_result(cli, &reply);
	dg_arena_free(&arena);
	if (r == 0)
		r = follow(cli, &c, req->op, on_event);
	client_close(&c);
	return r < 0 ? cli_error(cli, &cli->err) : 0;
}
