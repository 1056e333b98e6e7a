/* SPDX-License-Identifier: Apache-2.0 */
#ifndef DEVGATE_COMMANDS_H
#define DEVGATE_COMMANDS_H

#include "client.h"
#include "output.h"
#include "wire.h"

struct command {
	const char *name;
	const char *summary;
	int (*run)(struct cli *cli, int argc, char **argv);
};

int cmd_list(struct cli *cli, int argc, char **argv);
int cmd_grant(struct cli *cli, int argc, char **argv);
int cmd_revoke(struct cli *cli, int argc, char **argv);
int cmd_status(struct cli *cli, int argc, char **argv);
int cmd_extend(struct cli *cli, int argc, char **argv);
int cmd_move(struct cli *cli, int argc, char **argv);
int cmd_watch(struct cli *cli, int argc, char **argv);
int cmd_rescan(struct cli *cli, int argc, char **argv);
int cmd_reload(struct cli *cli, int argc, char **argv);
int cmd_hook(struct cli *cli, int argc, char **argv);
void cmd_hook_help(FILE *f, const char *synopsis);
int cmd_cdi(struct cli *cli, int argc, char **argv);
int cmd_metrics(struct cli *cli, int argc, char **argv);
int cmd_events(struct cli *cli, int argc, char **argv);
int cmd_doctor(struct cli *cli, int argc, char **argv);
int cmd_queue(struct cli *cli, int argc, char **argv);

/* Help lines of the options every command shares (-j/--json, -h/--help). */
extern const char cmd_common_help[];

/* Runs one request and hands the reply to render (or prints it as JSON). */
int cmd_call(struct cli *cli, const struct dg_request *req,
	     void (*render)(const struct cli *cli, const union dg_reply *reply));
/* cmd_call for a grant that may wait: on_wait (ctx: cli) hears its places. */
int cmd_call_wait(struct cli *cli, const struct dg_request *req,
		  void (*render)(const struct cli *cli, const union dg_reply *reply),
		  client_wait_fn on_wait);
void cmd_print_reply(enum dg_op op, const union dg_reply *reply);
/* A usage error when arguments are left over. */
int cmd_no_more_args(struct cli *cli, const char *cmd, int argc, char **argv);
/* Options of a command that takes only -j and -h; *done when help was printed. */
int cmd_common_options(struct cli *cli, const char *cmd, const char *help, int argc, char **argv,
		       bool *done);
/*
 * A streaming request: on_result (may be NULL) gets the reply, on_event
 * each event until devgated ends the stream or the user interrupts.
 */
int cmd_stream(struct cli *cli, const struct dg_request *req,
	       void (*on_result)(const struct cli *cli, const union dg_reply *reply),
	       void (*on_event)(const struct cli *cli, const union dg_stream_event *ev));

/*
 * Option parsing of the lease commands, apart from the call so it can be
 * tested: fills req from argv; *done when --help was printed.
 */
int list_parse(struct cli *cli, int argc, char **argv, struct dg_request *req, bool *done);
int grant_parse(struct cli *cli, int argc, char **argv, struct dg_request *req, bool *done);
int revoke_parse(struct cli *cli, int argc, char **argv, struct dg_request *req, bool *done);
int extend_parse(struct cli *cli, int argc, char **argv, struct dg_request *req, bool *done);
int move_parse(struct cli *cli, int argc, char **argv, struct dg_request *req, bool *done);

#endif
