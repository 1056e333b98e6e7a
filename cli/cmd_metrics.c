// SPDX-License-Identifier: Apache-2.0
/* metrics, events: what devgated counted, and the GPU accesses it saw denied. */
#include <getopt.h>
#include <stdio.h>

#include "cleanup.h"
#include "client.h"
#include "commands.h"

static const char metrics_help[] =
	"Usage: devgatectl metrics [--json]\n"
	"\n"
	"Prints devgated's metrics in the Prometheus text format: the document that\n"
	"'devgated --metrics-listen ADDR:PORT' serves at /metrics. With --json, an\n"
	"object whose \"text\" is that document.\n";

static void render_metrics(const struct cli *cli, const union dg_reply *reply)
{
	(void)cli;
	fputs(reply->metrics.text, stdout);
}

int cmd_metrics(struct cli *cli, int argc, char **argv)
{
	struct dg_request req = { .op = DG_OP_METRICS };
	bool done;
	int r = cmd_common_options(cli, "metrics", metrics_help, argc, argv, &done);

	if (r < 0 || done)
		return r;
	return cmd_call(cli, &req, render_metrics);
}

static const char events_help[] =
	"Usage: devgatectl events [--follow] [--json]\n"
	"\n"
	"Prints GPU accesses that were denied in containers devgate guards, one per line:\n"
	"the last 256 devgated kept, then with --follow new ones as they happen, until\n"
	"interrupted. The kernel reports at most one denial per container and device per\n"
	"second; devgate_device_accesses_denied_total counts them all. With --json each\n"
	"line is one JSON object: time, container, cgroup, cgroup_id, device, node, gpu,\n"
	"access.\n"
	"\n"
	"  -f, --follow           keep printing new events\n";

static void print_denial(const struct dg_denied_event *ev)
{
	printf("%s ", ev->time);
	if (ev->container)
		printf("%s (cgroup %s)", ev->container, ev->cgroup);
	else
		printf("cgroup id %llu", (unsigned long long)ev->cgroup_id);
	if (ev->node)
		printf(" was denied %s (%s%s%s)", ev->node, ev->device, ev->gpu ? ", " : "",
		       ev->gpu ? ev->gpu : "");
	else
		printf(" was denied %s", ev->device);
	printf(", access %s\n", ev->access);
	fflush(stdout);
}

static void on_event(const struct cli *cli, const union dg_stream_event *ev)
{
	(void)cli;
	print_denial(&ev->denied);
}

/* The recent events, one per line; with --json one object per line, as with --follow. */
static void print_recent(const struct cli *cli, const union dg_reply *reply)
{
	const struct dg_events_reply *r = &reply->events;

	for (size_t i = 0; i < r->n_events; i++) {
		if (cli->json) {
			auto_json json_object *o =
				dg_encode(&dg_denied_event_schema, &r->events[i]);

			puts(json_object_to_json_string_ext(
				o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
			fflush(stdout);
		} else {
			print_denial(&r->events[i]);
		}
	}
}

int cmd_events(struct cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "follow", no_argument, NULL, 'f' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct dg_request req = { .op = DG_OP_EVENTS };
	struct dg_arena arena = { 0 };
	union dg_reply reply;
	int o, r;

	while ((o = getopt_long(argc, argv, "fjh", opts, NULL)) != -1) {
		if (o == 'f') {
			req.u.events.follow = true;
		} else if (o == 'j') {
			cli->json = true;
		} else if (o == 'h') {
			printf("%s%s", events_help, cmd_common_help);
			return 0;
		} else {
			return cli_usage(cli, "events", "unknown option");
		}
	}
	r = cmd_no_more_args(cli, "events", argc, argv);
	if (r < 0)
		return r;
	if (req.u.events.follow)
		return cmd_stream(cli, &req, print_recent, on_event);
	r = client_request(cli->socket, cli->timeout_s, &req, &reply, &arena, &cli->err);
	if (r == 0)
		print_recent(cli, &reply);
	dg_arena_free(&arena);
	return r < 0 ? cli_error(cli, &cli->err) : 0;
}
