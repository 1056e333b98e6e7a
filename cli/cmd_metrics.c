// SPDX-License-Identifier: Apache-2.0
/* metrics, events: what devgated counted, and the GPU accesses it saw denied. */
#include <getopt.h>
#include <stdio.h>

#include "cleanup.h"
#include "client.h"
#include "commands.h"
#include "jsonutil.h"

static const char metrics_help[] =
	"Usage: devgatectl metrics [--json]\n"
	"\n"
	"Prints devgated's metrics in the Prometheus text format: the document that\n"
	"'devgated --metrics-listen ADDR:PORT' serves at /metrics. With --json, an\n"
	"object whose \"text\" is that document.\n";

static void render_metrics(const struct cli *cli, json_object *r)
{
	const char *text = json_get_str(r, "text");

	(void)cli;
	fputs(text ? text : "", stdout);
}

int cmd_metrics(struct cli *cli, int argc, char **argv)
{
	int r = cmd_common_options(cli, "metrics", metrics_help, argc, argv);

	if (r >= 0)
		return r;
	return cmd_call(cli, DG_OP_METRICS, NULL, render_metrics);
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

static void print_denial(const struct cli *cli, json_object *ev)
{
	const char *who = json_get_str(ev, "container"), *node = json_get_str(ev, "node");
	const char *gpu = json_get_str(ev, "gpu"), *device = json_get_str(ev, "device");

	if (cli->json) {
		puts(json_object_to_json_string_ext(ev, JSON_C_TO_STRING_PLAIN |
								JSON_C_TO_STRING_NOSLASHESCAPE));
		fflush(stdout);
		return;
	}
	printf("%s ", json_get_str(ev, "time"));
	if (who)
		printf("%s (cgroup %s)", who, json_get_str(ev, "cgroup"));
	else
		printf("cgroup id %s", json_get_str(ev, "cgroup_id"));
	if (node)
		printf(" was denied %s (%s%s%s)", node, device, gpu ? ", " : "", gpu ? gpu : "");
	else
		printf(" was denied %s", device);
	printf(", access %s\n", json_get_str(ev, "access"));
	fflush(stdout);
}

static void print_recent(const struct cli *cli, json_object *result)
{
	json_object *events = NULL;

	if (!json_object_object_get_ex(result, "events", &events))
		return;
	for (size_t i = 0; i < json_object_array_length(events); i++)
		print_denial(cli, json_object_array_get_idx(events, i));
}

int cmd_events(struct cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "follow", no_argument, NULL, 'f' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	auto_json json_object *result = NULL;
	struct dg_error err = { 0 };
	bool follow = false;
	json_object *args;
	int o;

	while ((o = getopt_long(argc, argv, "fjh", opts, NULL)) != -1) {
		if (o == 'f') {
			follow = true;
		} else if (o == 'j') {
			cli->json = true;
		} else if (o == 'h') {
			printf("%s%s", events_help, cmd_common_help);
			return 0;
		} else {
			return cli_usage(cli, "events", "unknown option");
		}
	}
	if (cmd_no_more_args(cli, "events", argc, argv))
		return dg_code_info(DG_E_INVALID)->exit_code;
	args = json_object_new_object();
	json_object_object_add(args, "follow", json_object_new_boolean(follow));
	if (follow)
		return cmd_stream(cli, DG_OP_EVENTS, args, print_recent, print_denial);
	/* One event per line with --json too, as with --follow. */
	if (client_request(cli->socket, DG_OP_EVENTS, args, &result, &err) < 0)
		return cli_fail(cli, &err);
	print_recent(cli, result);
	return 0;
}
