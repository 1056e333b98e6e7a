/* SPDX-License-Identifier: Apache-2.0 */
#ifndef DEVGATE_COMMANDS_H
#define DEVGATE_COMMANDS_H

#include "output.h"

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
int cmd_doctor(struct cli *cli, int argc, char **argv);

/* Parses the options every command shares (-j/--json, -h/--help). */
extern const char cmd_common_help[];

#endif
