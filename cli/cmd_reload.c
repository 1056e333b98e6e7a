// SPDX-License-Identifier: Apache-2.0
/* reload: devgated reads devgate.conf's policy again. */
#include <stdio.h>

#include "commands.h"

static const char reload_help[] =
	"Usage: devgatectl reload [--json]\n"
	"\n"
	"Makes devgated read devgate.conf again, as SIGHUP does, with its command-line\n"
	"options still over the file, and put the file's policy in force: gpu-allow,\n"
	"aliases, profiles and device-allow, for the next grant. A GPU that gpu-allow\n"
	"leaves out now is 'excluded': its leases keep it until revoked, new grants\n"
	"of it are refused. A file with an error is refused whole (exit 14) and the\n"
	"policy in force stays. Other keys wait for a restart; the reply names those\n"
	"that changed. Root or devgated's admin-group only.\n";

static void render_reload(const struct cli *cli, const union dg_reply *reply)
{
	const struct dg_reload_reply *r = &reply->reload;

	(void)cli;
	printf("policy reloaded: %lld GPU(s) excluded, %lld alias(es), %lld profile(s), "
	       "%lld device-allow entries\n",
	       (long long)r->excluded, (long long)r->aliases, (long long)r->profiles,
	       (long long)r->device_allow);
	if (r->newly_held)
		printf("%lld held GPU(s) excluded now: their leases keep them until revoked\n",
		       (long long)r->newly_held);
	if (r->restart)
		printf("changed, but in force only after a restart of devgated: %s\n", r->restart);
}

int cmd_reload(struct cli *cli, int argc, char **argv)
{
	struct dg_request req = { .op = DG_OP_RELOAD };
	bool done;
	int r = cmd_common_options(cli, "reload", reload_help, argc, argv, &done);

	if (r < 0 || done)
		return r;
	return cmd_call(cli, &req, render_reload);
}
