// SPDX-License-Identifier: Apache-2.0
/*
 * devgate-hook: the OCI hook on its own, for container runtimes to run. The
 * same code as 'devgatectl hook' in a small static binary with only json-c,
 * libcap and libseccomp linked in: runtimes start it twice for every container,
 * so its start-up time counts, and less code runs as root on input an image
 * shapes.
 *
 *   devgate-hook [-s SOCKET] [STAGE] [--gpu SEL | --alias NAME]
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "errors.h"
#include "protocol.h"
#include "version.h"

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	/* Like 'devgatectl hook', no environment is trusted: only -s moves the socket. */
	/* A grant may wait behind others; the runtime bounds the hook anyway. */
	struct cli cli = { .socket = DG_DEFAULT_SOCKET, .prog = "devgate-hook", .timeout_s = 60 };
	int o;

	/* '+': stop at the stage; the rest is cmd_hook's to parse. */
	while ((o = getopt_long(argc, argv, "+s:Vh", opts, NULL)) != -1) {
		switch (o) {
		case 's':
			cli.socket = optarg;
			break;
		case 'h':
			cmd_hook_help(
				stdout,
				"devgate-hook [-s SOCKET] [STAGE] [--gpu SEL | --alias NAME]");
			printf("  -s, --socket PATH      devgated's socket (default %s)\n"
			       "  -V, --version          show the version\n",
			       DG_DEFAULT_SOCKET);
			return 0;
		case 'V':
			printf("devgate-hook %s (protocol %d)\n", DEVGATE_VERSION,
			       DG_PROTO_VERSION);
			return 0;
		default:
			return cli_exit(&cli, cli_usage(&cli, "hook", "unknown option"));
		}
	}
	/* cmd_hook sees argv as 'devgatectl hook ...' would give it. */
	argv[optind - 1] = (char *)"hook";
	argc -= optind - 1;
	argv += optind - 1;
	optind = 0; /* 0: glibc re-initialises getopt fully, permutation included */
	return cli_exit(&cli, cmd_hook(&cli, argc, argv));
}
