// SPDX-License-Identifier: Apache-2.0
/* list, grant, revoke, status, watch: the admin's commands, and helpers all commands share. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "client.h"
#include "commands.h"
#include "jsonutil.h"
#include "util.h"

const char cmd_common_help[] = "  -j, --json             print JSON instead of text\n"
			       "  -h, --help             show this help\n";

static json_object *get(json_object *o, const char *key)
{
	json_object *v = NULL;

	return json_object_object_get_ex(o, key, &v) ? v : NULL;
}

static int get_int(json_object *o, const char *key)
{
	return json_object_get_int(get(o, key));
}

int cmd_call(struct cli *cli, enum dg_op op, json_object *args,
	     void (*render)(const struct cli *cli, json_object *result))
{
	auto_json json_object *result = NULL;
	struct dg_error err = { 0 };

	if (client_request(cli->socket, op, args, &result, &err) < 0)
		return cli_fail(cli, &err);
	if (cli->json)
		print_json(result);
	else
		render(cli, result);
	return 0;
}

int cmd_no_more_args(struct cli *cli, const char *cmd, int argc, char **argv)
{
	if (optind < argc)
		return cli_usage(cli, cmd, "unexpected argument '%s'", argv[optind]);
	return 0;
}

int cmd_common_options(struct cli *cli, const char *cmd, const char *help, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int o;

	while ((o = getopt_long(argc, argv, "jh", opts, NULL)) != -1) {
		if (o == 'j') {
			cli->json = true;
		} else if (o == 'h') {
			printf("%s%s", help, cmd_common_help);
			return 0;
		} else {
			return cli_usage(cli, cmd, "unknown option");
		}
	}
	return cmd_no_more_args(cli, cmd, argc, argv) ? dg_code_info(DG_E_INVALID)->exit_code : -1;
}

int cmd_stream(struct cli *cli, enum dg_op op, json_object *args,
	       void (*on_result)(const struct cli *cli, json_object *result),
	       void (*on_event)(const struct cli *cli, json_object *event))
{
	struct client_conn c = { .fd = -1 };
	auto_json json_object *result = NULL;
	struct dg_error err = { 0 };
	int r;

	r = client_connect(cli->socket, &c, &err);
	if (r < 0) {
		json_object_put(args);
		return cli_fail(cli, &err);
	}
	r = client_call(&c, op, args, &result, &err);
	if (r == 0 && on_result)
		on_result(cli, result);
	while (r == 0) {
		auto_json json_object *ev = NULL;

		r = client_next_event(&c, &ev, &err);
		if (r == 0)
			on_event(cli, ev);
	}
	client_close(&c);
	if (r == -ECONNRESET)
		dg_error_set(&err, DG_E_UNREACHABLE, ECONNRESET, "devgated stopped");
	return cli_fail(cli, &err);
}

/* ---- list ---- */

static const char list_help[] =
	"Usage: devgatectl list [--free] [--json]\n"
	"\n"
	"Lists the host's GPUs and control nodes: index, device minor, UUID, PCI bus id,\n"
	"vendor:product id, architecture, state (free, held, shared, unusable) and model.\n"
	"\n"
	"  -f, --free             only GPUs nobody holds\n";

static void holders_text(json_object *holders, char *buf, size_t len)
{
	size_t n = json_object_array_length(holders), off = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < n && off < len; i++) {
		json_object *h = json_object_array_get_idx(holders, i);
		const char *label = json_get_str(h, "container");

		off += (size_t)snprintf(buf + off, len - off, "%s%s", i ? "," : "",
					label ? label : json_get_str(h, "cgroup"));
	}
}

static void render_list(const struct cli *cli, json_object *r)
{
	static const char *const head[] = { "IDX", "MINOR", "UUID",  "PCI",
					    "PRODUCT", "ARCH", "STATE", "MODEL" };
	json_object *gpus = get(r, "gpus"), *ctl = get(r, "control_nodes");
	struct table *t = table_new(ARRAY_SIZE(head), head);
	size_t n = json_object_array_length(gpus);

	(void)cli;
	for (size_t i = 0; i < n; i++) {
		json_object *g = json_object_array_get_idx(gpus, i);
		char idx[16], minor[16], state[256], who[200];
		const char *cells[ARRAY_SIZE(head)];

		snprintf(idx, sizeof(idx), "%d", get_int(g, "index"));
		snprintf(minor, sizeof(minor), "%d", get_int(g, "minor"));
		holders_text(get(g, "holders"), who, sizeof(who));
		snprintf(state, sizeof(state), "%s%s%s", json_get_str(g, "state"), who[0] ? " by " : "",
			 who);
		cells[0] = idx;
		cells[1] = minor;
		cells[2] = json_get_str(g, "uuid");
		cells[3] = json_get_str(g, "pci");
		cells[4] = json_get_str(g, "product");
		cells[5] = json_get_str(g, "arch");
		cells[6] = state;
		cells[7] = json_get_str(g, "model");
		table_add(t, cells);
	}
	if (n)
		table_print(t, stdout);
	else
		printf("no GPU%s found under %s\n", json_get_bool(r, "free_only") ? " free" : "",
		       json_get_str(r, "host_root"));
	table_free(t);
	for (size_t i = 0; i < n; i++) {
		json_object *g = json_object_array_get_idx(gpus, i);

		if (json_get_str(g, "problem"))
			printf("GPU %d: %s\n", get_int(g, "index"), json_get_str(g, "problem"));
	}
	n = json_object_array_length(ctl);
	printf("control nodes:");
	for (size_t i = 0; i < n; i++) {
		json_object *c = json_object_array_get_idx(ctl, i);

		printf(" %s (%d:%d)", json_get_str(c, "path"), get_int(c, "major"),
		       get_int(c, "minor"));
	}
	printf("%s\n", n ? "" : " none (no NVIDIA driver in /proc/devices)");
	if (json_get_str(r, "control_problem"))
		printf("control nodes unusable: %s\n", json_get_str(r, "control_problem"));
}

int cmd_list(struct cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "free", no_argument, NULL, 'f' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	json_object *args = json_object_new_object();
	int o;

	while ((o = getopt_long(argc, argv, "fjh", opts, NULL)) != -1) {
		switch (o) {
		case 'f':
			json_object_object_add(args, "free", json_object_new_boolean(1));
			break;
		case 'j':
			cli->json = true;
			break;
		case 'h':
			printf("%s%s", list_help, cmd_common_help);
			json_object_put(args);
			return 0;
		default:
			json_object_put(args);
			return cli_usage(cli, "list", "unknown option");
		}
	}
	if (cmd_no_more_args(cli, "list", argc, argv)) {
		json_object_put(args);
		return dg_code_info(DG_E_INVALID)->exit_code;
	}
	return cmd_call(cli, DG_OP_LIST, args, render_list);
}

/* ---- grant / revoke ---- */

static const char grant_help[] =
	"Usage: devgatectl grant TARGET REQUEST [OPTIONS]\n"
	"\n"
	"Gives a running container GPUs: creates /dev/nvidia* nodes inside it and allows\n"
	"them in its cgroup's device programs. Exclusive unless --shared. All or nothing.\n"
	"\n"
	"TARGET (one of):\n"
	"  -p, --pid PID          a process of the container (host PID)\n"
	"  -c, --cgroup PATH      the container's cgroup, relative to the cgroup v2 root\n"
	"REQUEST (one of):\n"
	"  -g, --gpu SEL[,SEL..]  index, UUID or unique UUID prefix, PCI bus id, or 'all'\n"
	"  -N, --gpus N           N GPUs in total, lowest free indices first, optionally\n"
	"      --model STR        ... whose model contains STR\n"
	"      --arch NAME        ... of this architecture (e.g. hopper, ampere)\n"
	"      --product V:D      ... with this PCI vendor:device id (e.g. 10de:2330)\n"
	"OPTIONS:\n"
	"  -n, --container LABEL  name to show for the container (e.g. its runtime id)\n"
	"  -s, --shared           share the GPUs (time slicing) instead of holding them\n"
	"      --root PATH        rootfs inside the container's mount namespace, for\n"
	"                         containers that have not pivoted yet (OCI hooks)\n";

static const char revoke_help[] =
	"Usage: devgatectl revoke TARGET [--gpu SEL[,SEL..]] [--missing-ok]\n"
	"\n"
	"Takes GPUs back: the grant is removed from the container's device programs first\n"
	"(its next open() fails with EPERM), then the nodes are removed. Without --gpu,\n"
	"every GPU the container holds. When it holds none, the runtime's device programs\n"
	"are put back exactly as they were.\n"
	"\n"
	"TARGET (one of):\n"
	"  -p, --pid PID          a process of the container (host PID)\n"
	"  -c, --cgroup PATH      the container's cgroup, relative to the cgroup v2 root\n"
	"  -n, --container LABEL  the label given at grant time\n"
	"  -g, --gpu SEL[,SEL..]  only these GPUs\n"
	"      --missing-ok       succeed when the container holds no GPU\n";

enum { OPT_MODEL = 256, OPT_ARCH, OPT_PRODUCT, OPT_ROOT, OPT_MISSING_OK };

static int add_pid(struct cli *cli, const char *cmd, json_object *args, const char *s)
{
	pid_t pid;

	if (parse_pid(s, &pid) < 0)
		return cli_usage(cli, cmd, "'%s' is not a PID", s);
	json_object_object_add(args, "pid", json_object_new_int(pid));
	return 0;
}

static int add_count(struct cli *cli, json_object *args, const char *s)
{
	uint32_t n;

	if (parse_u32(s, &n) < 0 || n == 0 || n > 64)
		return cli_usage(cli, "grant", "--gpus wants a count from 1 to 64, not '%s'", s);
	json_object_object_add(args, "count", json_object_new_int((int)n));
	return 0;
}

static void put_str(json_object *args, const char *key, const char *v)
{
	json_object_object_add(args, key, json_object_new_string(v));
}

/* Options shared by grant and revoke; returns 1 if handled, <0 to stop. */
static int target_opt(struct cli *cli, const char *cmd, int o, json_object *args)
{
	switch (o) {
	case 'p':
		return add_pid(cli, cmd, args, optarg) ? -1 : 1;
	case 'c':
		put_str(args, "cgroup", optarg);
		return 1;
	case 'n':
		put_str(args, "container", optarg);
		return 1;
	case 'g':
		put_str(args, "gpus", optarg);
		return 1;
	case 'j':
		cli->json = true;
		return 1;
	default:
		return 0;
	}
}

static void describe_gpus(json_object *gpus, json_object *only, char *buf, size_t len)
{
	size_t n = json_object_array_length(gpus), off = 0, shown = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < n && off < len; i++) {
		json_object *g = json_object_array_get_idx(gpus, i);
		const char *uuid = json_get_str(g, "uuid");
		bool listed = !only;

		for (size_t k = 0; only && k < json_object_array_length(only); k++)
			listed |= strcmp(json_object_get_string(json_object_array_get_idx(only, k)),
					 uuid) == 0;
		if (!listed)
			continue;
		off += (size_t)snprintf(buf + off, len - off, "%sGPU %d (%s)", shown++ ? ", " : "",
					get_int(g, "index"), uuid);
	}
}

static void print_nodes(json_object *nodes)
{
	for (size_t i = 0; i < json_object_array_length(nodes); i++) {
		json_object *n = json_object_array_get_idx(nodes, i);

		printf("  %-24s %s\n", json_get_str(n, "path"), json_get_str(n, "status"));
	}
}

static void print_warnings(json_object *r)
{
	json_object *w = get(r, "warnings");

	for (size_t i = 0; w && i < json_object_array_length(w); i++)
		fprintf(stderr, "warning: %s\n", json_object_get_string(json_object_array_get_idx(w, i)));
}

static const char *who(json_object *r)
{
	const char *label = json_get_str(r, "container");

	return label ? label : json_get_str(r, "cgroup");
}

static void render_grant(const struct cli *cli, json_object *r)
{
	json_object *granted = get(r, "granted");
	char text[2048];

	(void)cli;
	if (json_object_array_length(granted) == 0) {
		describe_gpus(get(r, "gpus"), NULL, text, sizeof(text));
		printf("%s already holds what was asked (%s); nothing new granted\n", who(r), text);
	} else {
		describe_gpus(get(r, "gpus"), granted, text, sizeof(text));
		printf("granted %s to %s (cgroup %s, PID %d)\n", text, who(r),
		       json_get_str(r, "cgroup"), get_int(r, "pid"));
	}
	print_nodes(get(r, "nodes"));
	print_warnings(r);
}

int cmd_grant(struct cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "pid", required_argument, NULL, 'p' },
		{ "cgroup", required_argument, NULL, 'c' },
		{ "container", required_argument, NULL, 'n' },
		{ "gpu", required_argument, NULL, 'g' },
		{ "gpus", required_argument, NULL, 'N' },
		{ "model", required_argument, NULL, OPT_MODEL },
		{ "arch", required_argument, NULL, OPT_ARCH },
		{ "product", required_argument, NULL, OPT_PRODUCT },
		{ "shared", no_argument, NULL, 's' },
		{ "root", required_argument, NULL, OPT_ROOT },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	auto_json json_object *args = json_object_new_object();
	int o, r;

	while ((o = getopt_long(argc, argv, "p:c:n:g:N:sjh", opts, NULL)) != -1) {
		r = target_opt(cli, "grant", o, args);
		if (r < 0)
			return dg_code_info(DG_E_INVALID)->exit_code;
		if (r > 0)
			continue;
		switch (o) {
		case 'N':
			if (add_count(cli, args, optarg) < 0)
				return dg_code_info(DG_E_INVALID)->exit_code;
			break;
		case OPT_MODEL:
			put_str(args, "model", optarg);
			break;
		case OPT_ARCH:
			put_str(args, "arch", optarg);
			break;
		case OPT_PRODUCT:
			put_str(args, "product", optarg);
			break;
		case OPT_ROOT:
			put_str(args, "root", optarg);
			break;
		case 's':
			json_object_object_add(args, "shared", json_object_new_boolean(1));
			break;
		case 'h':
			printf("%s%s", grant_help, cmd_common_help);
			return 0;
		default:
			return cli_usage(cli, "grant", "unknown option");
		}
	}
	if (cmd_no_more_args(cli, "grant", argc, argv))
		return dg_code_info(DG_E_INVALID)->exit_code;
	if (!get(args, "pid") && !get(args, "cgroup"))
		return cli_usage(cli, "grant", "name the container with --pid or --cgroup");
	if (!get(args, "gpus") && !get(args, "count"))
		return cli_usage(cli, "grant", "ask for GPUs with --gpu SEL or --gpus N");
	return cmd_call(cli, DG_OP_GRANT, TAKE_PTR(args), render_grant);
}

static void render_revoke(const struct cli *cli, json_object *r)
{
	json_object *revoked = get(r, "revoked");
	size_t n = json_object_array_length(revoked);

	(void)cli;
	if (!get(r, "cgroup")) {
		printf("the container holds no GPU; nothing to revoke\n");
		return;
	}
	printf("revoked %zu GPU%s from %s:", n, n == 1 ? "" : "s", who(r));
	for (size_t i = 0; i < n; i++)
		printf(" %s", json_object_get_string(json_object_array_get_idx(revoked, i)));
	printf("\n");
	print_nodes(get(r, "nodes"));
	if (json_object_array_length(get(r, "gpus")) == 0)
		printf("%s holds no GPU now; its device programs are restored\n", who(r));
}

int cmd_revoke(struct cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "pid", required_argument, NULL, 'p' },
		{ "cgroup", required_argument, NULL, 'c' },
		{ "container", required_argument, NULL, 'n' },
		{ "gpu", required_argument, NULL, 'g' },
		{ "missing-ok", no_argument, NULL, OPT_MISSING_OK },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	auto_json json_object *args = json_object_new_object();
	int o, r;

	while ((o = getopt_long(argc, argv, "p:c:n:g:jh", opts, NULL)) != -1) {
		r = target_opt(cli, "revoke", o, args);
		if (r < 0)
			return dg_code_info(DG_E_INVALID)->exit_code;
		if (r > 0)
			continue;
		switch (o) {
		case OPT_MISSING_OK:
			json_object_object_add(args, "missing_ok", json_object_new_boolean(1));
			break;
		case 'h':
			printf("%s%s", revoke_help, cmd_common_help);
			return 0;
		default:
			return cli_usage(cli, "revoke", "unknown option");
		}
	}
	if (cmd_no_more_args(cli, "revoke", argc, argv))
		return dg_code_info(DG_E_INVALID)->exit_code;
	if (!get(args, "pid") && !get(args, "cgroup") && !get(args, "container"))
		return cli_usage(cli, "revoke", "name the container with --pid, --cgroup or "
				 "--container");
	return cmd_call(cli, DG_OP_REVOKE, TAKE_PTR(args), render_revoke);
}

/* ---- status ---- */

static const char status_help[] = "Usage: devgatectl status [--json]\n"
				   "\n"
				   "Lists leases: which container holds which GPUs, since when, "
				   "shared or exclusive.\n";

static void render_status(const struct cli *cli, json_object *r)
{
	static const char *const head[] = { "CONTAINER", "CGROUP", "PID", "SINCE", "MODE", "GPUS" };
	json_object *leases = get(r, "leases");
	struct table *t = table_new(ARRAY_SIZE(head), head);
	size_t n = json_object_array_length(leases);

	(void)cli;
	for (size_t i = 0; i < n; i++) {
		json_object *l = json_object_array_get_idx(leases, i), *gpus = get(l, "gpus");
		char pid[16], list[1024];
		const char *cells[ARRAY_SIZE(head)];
		bool shared = json_object_array_length(gpus) &&
			      json_get_bool(json_object_array_get_idx(gpus, 0), "shared");

		snprintf(pid, sizeof(pid), "%d", get_int(l, "pid"));
		describe_gpus(gpus, NULL, list, sizeof(list));
		cells[0] = json_get_str(l, "container");
		cells[1] = json_get_str(l, "cgroup");
		cells[2] = pid;
		cells[3] = json_get_str(l, "since");
		cells[4] = shared ? "shared" : "exclusive";
		cells[5] = list;
		table_add(t, cells);
	}
	if (n)
		table_print(t, stdout);
	else
		printf("no leases: every GPU is free\n");
	table_free(t);
}

int cmd_status(struct cli *cli, int argc, char **argv)
{
	int r = cmd_common_options(cli, "status", status_help, argc, argv);

	if (r >= 0)
		return r;
	return cmd_call(cli, DG_OP_STATUS, NULL, render_status);
}

/* ---- watch ---- */

static const char watch_help[] =
	"Usage: devgatectl watch [--json]\n"
	"\n"
	"Prints lease changes as they happen (granted, revoked, released), one per line,\n"
	"until interrupted. With --json each line is one JSON object.\n";

static void print_event(const struct cli *cli, json_object *ev)
{
	json_object *lease = get(ev, "lease"), *gpus = get(ev, "gpus");

	if (cli->json) {
		puts(json_object_to_json_string_ext(ev, JSON_C_TO_STRING_PLAIN));
	} else {
		printf("%s %s (cgroup %s):", json_get_str(ev, "type"), who(lease),
		       json_get_str(lease, "cgroup"));
		for (size_t i = 0; i < json_object_array_length(gpus); i++)
			printf(" %s", json_object_get_string(json_object_array_get_idx(gpus, i)));
		printf("\n");
	}
	fflush(stdout);
}

int cmd_watch(struct cli *cli, int argc, char **argv)
{
	int r = cmd_common_options(cli, "watch", watch_help, argc, argv);

	if (r >= 0)
		return r;
	return cmd_stream(cli, DG_OP_WATCH, NULL, NULL, print_event);
}
