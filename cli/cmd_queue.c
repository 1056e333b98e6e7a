// SPDX-License-Identifier: Apache-2.0
/* devgatectl queue: the grants waiting for GPUs (grant --wait). */
#include <stdio.h>

#include "commands.h"

static const char queue_help[] =
	"Usage: devgatectl queue [--json]\n"
	"\n"
	"Lists the grants that wait for GPUs (grant --wait, or the hook's annotation\n"
	"devgate.io/wait) in the order devgated will serve them: higher priority first,\n"
	"first come first within a priority. A waiter is served the moment a lease\n"
	"ends and its request fits; it leaves the queue when its client does (Ctrl-C),\n"
	"when its container ends or when its TIMEOUT runs out.\n";

static void render_queue(const struct cli *cli, const union dg_reply *reply)
{
	const struct dg_queue_reply *q = &reply->queue;

	(void)cli;
	if (q->n_waiters == 0) {
		printf("no grant is waiting\n");
		return;
	}
	printf("%-4s %-8s %-24s %-28s %-10s %s\n", "POS", "PRIORITY", "CONTAINER", "REQUEST",
	       "WAITED", "TIMEOUT");
	for (size_t i = 0; i < q->n_waiters; i++) {
		const struct dg_waiter_info *w = &q->waiters[i];
		char target[64], timeout[32];

		if (w->container)
			snprintf(target, sizeof(target), "%s", w->container);
		else if (w->has_pid)
			snprintf(target, sizeof(target), "PID %lld", (long long)w->pid);
		else
			snprintf(target, sizeof(target), "%s", w->cgroup ? w->cgroup : "-");
		if (w->has_timeout)
			snprintf(timeout, sizeof(timeout), "%llds", (long long)w->timeout);
		else
			snprintf(timeout, sizeof(timeout), "none");
		printf("%-4lld %-8lld %-24s %-28s %-10.1f %s\n", (long long)w->position,
		       (long long)w->priority, target, w->request, (double)w->waited_ms / 1000,
		       timeout);
	}
}

int cmd_queue(struct cli *cli, int argc, char **argv)
{
	struct dg_request req = { .op = DG_OP_QUEUE };
	bool done;
	int r = cmd_common_options(cli, "queue", queue_help, argc, argv, &done);

	if (r < 0 || done)
		return r;
	return cmd_call(cli, &req, render_queue);
}
