// SPDX-License-Identifier: Apache-2.0
/*
 * Finds the cgroup v2 mount, or a v1 hierarchy by its controller, in
 * /proc/PID/mountinfo text (the last one the caller can use, its octal
 * escapes undone) and tells whether a path is v2. Parsing only.
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

bool mountinfo_list_has(const char *list, size_t len, const char *word)
{
	size_t wlen = strlen(word);
	const char *p = list, *end = list + len;

	while (p < end) {
		const char *comma = memchr(p, ',', (size_t)(end - p));
		size_t n = comma ? (size_t)(comma - p) : (size_t)(end - p);

		if (n == wlen && memcmp(p, word, n) == 0)
			return true;
		p = comma ? comma + 1 : end;
	}
	return false;
}

/*
 * The mount point, in mnt, of a line that mounts a whole hierarchy (root
 * "/") of fstype whose super options have word (NULL: any); false for any
 * other line.
 */
static bool hierarchy_line(const char *line, const char *fstype, const char *word,
			   char mnt[PATH_MAX])
{
	char root[PATH_MAX], fs[64], opts[1024] = "";
	const char *sep = strstr(line, " - ");

	if (!sep || sscanf(sep, " - %63s %*s %1023s", fs, opts) < 1 || strcmp(fs, fstype) != 0)
		return false;
	if (word && !mountinfo_list_has(opts, strlen(opts), word))
		return false;
	if (sscanf(line, "%*s %*s %*s %4095s %4095s", root, mnt) != 2 || strcmp(root, "/") != 0)
		return false;
	unescape_octal(mnt);
	return true;
}

static int find_last(const char *text, const char *fstype, const char *word,
		     bool (*usable)(const char *path), char **ret)
{
	auto_free char *copy = strdup(text);
	auto_free char *found = NULL;
	char *save = NULL;

	if (!copy)
		return -ENOMEM;
	for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char mnt[PATH_MAX];

		/* Later lines were mounted later: the last usable one wins. */
		if (!hierarchy_line(line, fstype, word, mnt) || (usable && !usable(mnt)))
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

int mountinfo_find_cgroup2(const char *text, bool (*usable)(const char *path), char **ret)
{
	return find_last(text, "cgroup2", NULL, usable, ret);
}

int mountinfo_find_cgroup1(const char *text, const char *controller,
			   bool (*usable)(const char *path), char **ret)
{
	return find_last(text, "cgroup", controller, usable, ret);
}

bool mountinfo_is_cgroup2(const char *path)
{
	struct statfs st;

	return statfs(path, &st) == 0 && st.f_type == CGROUP2_SUPER_MAGIC;
}
