/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A process's cgroup v2 path from /proc/PID/cgroup text. Parsing only, no
 * file is read; shared by devgated's sys/cgroup.c and grant/proof.c, and
 * by the unit tests, which fake the reading.
 */
#ifndef DEVGATE_PROCCG_H
#define DEVGATE_PROCCG_H

/* Finds the "0::PATH" line in /proc/PID/cgroup text; -ENOMEDIUM if absent. */
int proc_cgroup_parse(const char *text, char **ret);

#endif
