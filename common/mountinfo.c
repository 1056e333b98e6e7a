// SPDX-License-Identifier: Apache-2.0
/*
 * Finds the cgroup v2 mount in /proc/PID/mountinfo text (the last one the
 * caller can use, its octal escapes undone) and tells whether a path is
 * one. Parsing only.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/vfs.h>

#include "cleanup.h"
#include "mountinfo.h"

/* Undoes mountinfo's octal escapes (\040 for space and so on). */
static void unescape_octal(char *s)
{
	char *out = s;

	while (*s) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*out++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 4;
		} else {
			*out++ = *s++;
		}
	}
	*out = '\0';
}

void mountinfo_unescape(char *s)
{
	unescape_octal(s);
}

int mountinfo_find_cgroup2(const char *text, bool (*usable)(const char *path), char **ret)
{
	auto_free char *copy = strdup(text);
	auto_free char *found = NULL;
	char *save = NULL;

	if (!copy)
		return -ENOMEM;
	for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char root[PATH_MAX], mnt[PATH_MAX];
		const char *sep = strstr(line, " - ");
		char fstype[64];

		if (!sep || sscanf(sep, " - %63s", fstype) != 1 || strcmp(fstype, "cgroup2") != 0)
			continue;
		if (sscanf(line, "%*s %*s %*s %4095s %4095s", root, mnt) != 2)
			continue;
		if (strcmp(root, "/") != 0)
			continue;
		unescape_octal(mnt);
		/* Later lines were mounted later: the last usable one wins. */
		if (usable && !usable(mnt))
			continue;
		free(found);
		found = strdup(mnt);
		if (!found)
			return -ENOMEM;
	}
	if (!found)
		return -ENOENT;
	*ret = TAKE_PTR(found);
	return 0;
}

bool mountinfo_is_cgroup2(const char *path)
{
	struct statfs st;

	return statfs(path, &st) == 0 && st.f_type == CGROUP2_SUPER_MAGIC;
}
