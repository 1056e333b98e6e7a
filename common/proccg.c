// SPDX-License-Identifier: Apache-2.0
/*
 * A process's cgroup v2 path from /proc/PID/cgroup text (see proccg.h).
 * Parsing only: no file is opened here.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "proccg.h"

int proc_cgroup_parse(const char *text, char **ret)
{
	const char *line = text;

	while (line && *line) {
		const char *eol = strchr(line, '\n');
		size_t len = eol ? (size_t)(eol - line) : strlen(line);

		if (len >= 3 && strncmp(line, "0::", 3) == 0) {
			if (len == 3 || line[3] != '/')
				return -EINVAL;
			*ret = strndup(line + 3, len - 3);
			return *ret ? 0 : -ENOMEM;
		}
		line = eol ? eol + 1 : NULL;
	}
	return -ENOMEDIUM;
}
