/* SPDX-License-Identifier: Apache-2.0 */
/* /proc/PID/mountinfo parsing, shared by devgated and devgatectl doctor. */
#ifndef DEVGATE_MOUNTINFO_H
#define DEVGATE_MOUNTINFO_H

#include <stdbool.h>
#include <stddef.h>

/*
 * Finds a cgroup2 mount (root "/") in mountinfo text that usable() accepts
 * (NULL: any), the last first: a later mount may be stacked over an
 * earlier one (cgroup2 on /sys/fs/cgroup hides /sys/fs/cgroup/unified).
 * -ENOENT if none.
 */
int mountinfo_find_cgroup2(const char *text, bool (*usable)(const char *path), char **ret);
/* Like mountinfo_find_cgroup2, for the cgroup v1 hierarchy whose super options name controller. */
int mountinfo_find_cgroup1(const char *text, const char *controller,
			   bool (*usable)(const char *path), char **ret);
/* True when the comma-separated list (len bytes) has the exact word. */
bool mountinfo_list_has(const char *list, size_t len, const char *word);
/* path reaches a cgroup2 filesystem from here (statfs), not something on top. */
bool mountinfo_is_cgroup2(const char *path);

#endif
