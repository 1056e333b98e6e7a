/* SPDX-License-Identifier: Apache-2.0 */
/* /proc/PID/mountinfo parsing, shared by devgated and devgatectl doctor. */
#ifndef DEVGATE_MOUNTINFO_H
#define DEVGATE_MOUNTINFO_H

/* Finds the cgroup2 mount (root "/") in mountinfo text; -ENOENT if none. */
int mountinfo_find_cgroup2(const char *text, char **ret);

#endif
