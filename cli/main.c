// SPDX-License-Identifier: Apache-2.0
/*
 * devgatectl: the admin's and the runtime's front end to devgated.
 * Grammar: devgatectl [GLOBAL OPTIONS] COMMAND [OPTIONS]. No prefix matching
 * of commands: scripts must not break when commands are added.
 */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "errors.h"
#include "protocol.h"
#include "util.h"
#include "version.h"

static int cmd_version(struct cli *cli, int argc, char **argv);
static int cmd_help(struct cli *cli, int argc, char **argv);

static const struct command commands[] = {
	{ "list", "list GPUs, control nodes and who holds them", cmd_list },
	{ "grant", "give a running container GPUs", cmd_grant },
	{ "revoke", "take GPUs back from a container", cmd_revoke },
	{ "extend", "give a lease with a ttl more time", cmd_extend },
	{ "move", "move GPUs from one container to another, without a gap", cmd_move },
	{ "status", "list leases", cmd_status },
	{ "queue", "list grants waiting for GPUs (grant --wait)", cmd_queue },
	{ "watch", "print lease changes as they happen", cmd_watch },
	{ "rescan", "make devgated re-read the host's GPUs now", cmd_rescan },
	{ "reload", "make devgated re-read devgate.conf's policy now", cmd_reload },
	{ "hook", "OCI hook for container runtimes (reads state on stdin)", cmd_hook },
	{ "cdi", "generate a CDI spec for this host's GPUs", cmd_cdi },
	{ "metrics", "print devgated's metrics (Prometheus text)", cmd_metrics },
	{ "events", "print denied GPU accesses; --follow for new ones", cmd_events },
	{ "doctor", "check this host for what devgate needs", cmd_doctor },
	{ "version", "print the version", cmd_version },
	{ "help", "show help for a command", cmd_help },
};

static void usage(FILE *f)
{
	fprintf(f, "Usage: devgatectl [-s SOCKET] [-j] COMMAND [OPTIONS]\n"
		   "\n"
		   "Give running containers GPUs and take them back (see devgatectl(8)).\n"
		   "\n"
		   "Commands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
	fprintf(f,
		"\n"
		"Global options:\n"
		"  -s, --socket PATH  devgated's socket (default $DEVGATE_SOCKET or %s)\n"
		"  -t, --timeout S    give up when devgated has not accepted or answered\n"
		"                     within S seconds (default 10; streams wait forever)\n"
		"  -j, --json         JSON output, errors included\n"
		"  -h, --help         show this help; 'devgatectl COMMAND --help' for a command\n"
		"  -V, --version      show the version\n"
		"\n"
		"Exit status:\n",
		DG_DEFAULT_SOCKET);
	/* Codes that share a status (check_failed and internal) show once. */
	for (int c = 0; c < DG_CODE_MAX; c++) {
		if (c != DG_E_CHECK)
			fprintf(f, "  %3d  %s\n", dg_code_info(c)->exit_code,
				dg_code_info(c)->summary);
	}
}

/* Edit distance (insert, delete, substitute), capped: names are short. */
static size_t distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), row[33];

	if (la > 32 || lb > 32)
		return SIZE_MAX;
	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t diag = row[0];

		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t up = row[j], best = diag + (a[i - 1] != b[j - 1]);

			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			diag = up;
			row[j] = best;
		}
	}
	return row[lb];
}

static const struct command *find_command(const char *name)
{
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		if (strcmp(commands[i].name, name) == 0)
			return &commands[i];
	}
	return NULL;
}

/* "no command 'lsit'", with the closest command when one is close. */
static int no_command(struct cli *cli, const char *name)
{
	const char *best = NULL;
	size_t best_d = 3; /* further than two edits is no suggestion */

	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		size_t d = distance(name, commands[i].name);

		if (d < best_d) {
			best_d = d;
			best = commands[i].name;
		}
	}
	cli_usage(cli, NULL, "no command '%s'", name);
	if (best)
		dg_error_hint(&cli->err, "did you mean 'devgatectl %s'? See 'devgatectl --help'",
			      best);
	return -EINVAL;
}

static int cmd_version(struct cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int o;

	while (argv && (o = getopt_long(argc, argv, "jh", opts, NULL)) != -1) {
		if (o == 'j') {
			cli->json = true;
		} else if (o == 'h') {
			printf("Usage: devgatectl version [--json]\n\n"
			       "Prints devgatectl's version and protocol version.\n%s",
			       cmd_common_help);
			return 0;
		} else {
			return cli_usage(cli, "version", "unknown option");
		}
	}
	if (cli->json)
		printf("{ \"version\": \"%s\", \"protocol\": %d }\n", DEVGATE_VERSION,
		       DG_PROTO_VERSION);
	else
		printf("devgatectl %s (protocol %d)\n", DEVGATE_VERSION, DG_PROTO_VERSION);
	return 0;
}

static int cmd_help(struct cli *cli, int argc, char **argv)
{
	const struct command *cmd;
	char *help_argv[] = { NULL, (char *)"--help", NULL };

	if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		usage(stdout);
		return 0;
	}
	cmd = find_command(argv[1]);
	if (!cmd)
		return no_command(cli, argv[1]);
	help_argv[0] = argv[1];
	optind = 0; /* 0: glibc re-initialises getopt fully, permutation included */
	return cmd->run(cli, 2, help_argv);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "timeout", required_argument, NULL, 't' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 },
	};
	struct cli cli = { .socket = NULL };
	const char *env_socket = getenv("DEVGATE_SOCKET");
	const struct command *cmd;
	int o;

	/* '+': stop at the command name; its options are its own. */
	while ((o = getopt_long(argc, argv, "+s:t:jhV", opts, NULL)) != -1) {
		uint32_t t;

		switch (o) {
		case 's':
			cli.socket = optarg;
			break;
		case 't':
			if (parse_u32(optarg, &t) < 0 || t < 1 || t > 3600)
				return cli_exit(&cli, cli_usage(&cli, NULL,
								"--timeout wants seconds "
								"from 1 to 3600, not '%s'",
								optarg));
			cli.timeout_s = t;
			break;
		case 'j':
			cli.json = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			return cli_exit(&cli, cmd_version(&cli, 0, NULL));
		default:
			return cli_exit(&cli, cli_usage(&cli, NULL, "unknown global option"));
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return dg_code_info(DG_E_INVALID)->exit_code;
	}
	cmd = find_command(argv[optind]);
	if (!cmd)
		return cli_exit(&cli, no_command(&cli, argv[optind]));
	/* The hook trusts no environment: only -s names another socket. */
	if (!cli.socket)
		cli.socket = cmd->run != cmd_hook && env_socket && *env_socket ? env_socket
									       : DG_DEFAULT_SOCKET;
	argv += optind;
	argc -= optind;
	optind = 0; /* 0: glibc re-initialises getopt fully, permutation included */
	return cli_exit(&cli, cmd->run(&cli, argc, argv));
}
