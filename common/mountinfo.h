/* SPDX-License-Identifier: Apache-2.0 */
/* /proc/PID/mountinfo parsing, shared by devgated and devgatectl doctor. */
#ifndef DEVGATE_MOUNTINFO_H
#define DEVGATE_MOUNTINFO_H

#include <stdbool.h>

/*
 * Finds a cgroup2 mount (root "/") in mountinfo text that usable() accepts
 * (NULL: any), the last first: a later mount may be stacked over an
 * earlier one (cgroup2 on /sys/fs/cgroup hides /sys/fs/cgroup/unified).
 * -ENOENT if none.
 */
int mountinfo_find_cgroup2(const char *text, bool (*usable)(const char *path), char **ret);
/* Undoes mountinfo's octal escapes in place (\040 for a space). */
void mountinfo_unescape(char *s);
/* path reaches a cgroup2 filesystem from here (statfs), not something on top. */
bool mountinfo_is_cgroup2(const char *path);

#endif
