/* SPDX-License-Identifier: Apache-2.0 */
#ifndef DEVGATE_COMMANDS_H
#define DEVGATE_COMMANDS_H

#include "output.h"
#include "protocol.h"

struct command {
	const char *name;
	const char *summary;
	int (*run)(struct cli *cli, int argc, char **argv);
};

int cmd_list(struct cli *cli, int argc, char **argv);
int cmd_grant(struct cli *cli, int argc, char **argv);
int cmd_revoke(struct cli *cli, int argc, char **argv);
int cmd_status(struct cli *cli, int argc, char **argv);
int cmd_watch(struct cli *cli, int argc, char **argv);
int cmd_hook(struct cli *cli, int argc, char **argv);
void cmd_hook_help(FILE *f, const char *synopsis);
int cmd_cdi(struct cli *cli, int argc, char **argv);
int cmd_metrics(struct cli *cli, int argc, char **argv);
int cmd_events(struct cli *cli, int argc, char **argv);
int cmd_doctor(struct cli *cli, int argc, char **argv);

/* Help lines of the options every command shares (-j/--json, -h/--help). */
extern const char cmd_common_help[];

/* Runs one request and hands the result to render (or prints JSON). */
int cmd_call(struct cli *cli, enum dg_op op, json_object *args,
	     void (*render)(const struct cli *cli, json_object *result));
/* 0, or the usage error's exit code when arguments are left over. */
int cmd_no_more_args(struct cli *cli, const char *cmd, int argc, char **argv);
/*
 * Options of a command that takes only -j and -h, and no argument. Returns
 * -1 to go on, or the exit status to return with (help printed, or misuse).
 */
int cmd_common_options(struct cli *cli, const char *cmd, const char *help, int argc, char **argv);
/*
 * A streaming request: on_result (may be NULL) gets the reply, on_event
 * each event until devgated ends the stream or the user interrupts.
 * Returns the exit status.
 */
int cmd_stream(struct cli *cli, enum dg_op op, json_object *args,
	       void (*on_result)(const struct cli *cli, json_object *result),
	       void (*on_event)(const struct cli *cli, json_object *event));

#endif
